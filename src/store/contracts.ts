/**
 * The durable state contracts: one async interface per kind of state, and the
 * `Store` bundle every backend (memory, SQLite, Redis) implements. See
 * docs/design/store-and-replicas.md.
 */
import type { ServerConfig } from "../config/server-entry.js";
import type { RpcErrorRecord } from "../errors.js";

// ---------------------------------------------------------------- tasks

/**
 * A task's status as stored. `input_required` is MCP's; the gateway keeps a
 * tool task whose call waits for the client `working` with `inputRequired`.
 */
export type ProxyTaskStatus = "working" | "input_required" | "completed" | "failed" | "cancelled" | "expired";

/**
 * A gateway task (tool call or receiver task) as stored. Every record names
 * the session that owns it; lookups by another session read "not found".
 */
export interface TaskRecord {
  taskId: string;
  sessionId: string;
  /**
   * `tool`: a tool call run by the gateway (meta promotion, or a task-augmented
   * call of a tool the upstream runs synchronously) or mapped onto an upstream
   * task. `receiver`: a task-augmented sampling/elicitation request an upstream
   * sent to the gateway (design TK-17). Absent means `tool`.
   */
  kind?: "tool" | "receiver";
  server: string;
  /** The tool name; for receiver tasks the request method. */
  toolName: string;
  toolArgs: Record<string, unknown>;
  /** The upstream's own task id when the call runs as an upstream task (never shown downstream). */
  upstreamTaskId?: string;
  pollIntervalMs?: number;
  status: ProxyTaskStatus;
  /**
   * A `working` task whose call waits for the client (an elicitation or
   * sampling request attributed to it): MCP shows it as `input_required`.
   */
  inputRequired?: boolean;
  statusMessage?: string;
  createdAt: number;
  lastUpdatedAt: number;
  ttlMs: number;
  expiresAt: number;
  progress?: { progress: number; total?: number; message?: string };
  /** The result (plain JSON). Absent for upstream tasks: their result stays upstream until asked for. */
  result?: Record<string, unknown>;
  /** JSON size of `result` (retention is bounded in bytes per session). */
  resultBytes?: number;
  /** The task ended upstream: tasks/result asks the upstream for what it returned. */
  resultUpstream?: boolean;
  error?: string;
  rpcError?: RpcErrorRecord;
  /**
   * For tasks mapped onto an upstream task: the upstream's MCP session id
   * (HTTP upstreams) the upstream task belongs to, so it can be asked about
   * after the gateway reconnects or restarts.
   */
  upstreamSessionId?: string;
  /**
   * Absolute time (epoch ms) after which the row may be deleted by
   * `deleteExpired()`: set by the owner when a task ends (end + retention,
   * never before its TTL ran out) and for receiver tasks at creation (their
   * TTL). Absent: kept until deleted or given one (a working tool task).
   */
  retainUntil?: number;
}

/** The fields a transition or patch may change (identity, kind and creation stay). */
export type TaskPatch = Partial<Omit<TaskRecord, "taskId" | "sessionId" | "kind" | "status" | "createdAt" | "server" | "toolName" | "toolArgs">>;

export interface TaskTransition {
  /** The move happens only while the current status is one of these. */
  from: readonly ProxyTaskStatus[];
  to: ProxyTaskStatus;
  patch?: TaskPatch;
  /** Fields to remove (e.g. a statusMessage that no longer holds). */
  unset?: readonly (keyof TaskPatch)[];
}

export interface TaskQuery {
  /** Absent records count as `tool`. */
  kind?: "tool" | "receiver";
  server?: string;
  status?: readonly ProxyTaskStatus[];
  /** Paging: records whose taskId sorts after this one. */
  afterTaskId?: string;
  limit?: number;
}

export interface TaskRetention {
  /** Ended tasks kept for the session (gateway.tasks.maxRetainedPerSession). */
  maxCount: number;
  /** Bytes of results kept for the session (gateway.tasks.maxRetainedResultBytes). */
  maxBytes: number;
  /** Never deleted by this call (the task that just ended: its client may be about to ask for the result). */
  keep?: string;
  /** Which tasks count. @default "tool" */
  kind?: "tool" | "receiver";
}

export interface TaskRef {
  taskId: string;
  sessionId: string;
}

export interface TaskStore {
  get(taskId: string): Promise<TaskRecord | undefined>;
  /** Stores a new task; an existing id is an EMCP_INTERNAL error (ids are generated, a clash is a bug). */
  create(record: TaskRecord): Promise<void>;
  /**
   * Compare-and-set: when the task's current status is in `from`, applies the
   * patch, sets `to` and returns the new record; otherwise (or when the task
   * does not exist) changes nothing and returns undefined. So `working →
   * completed` never overwrites a `cancelled` another path wrote first.
   */
  transition(taskId: string, change: TaskTransition): Promise<TaskRecord | undefined>;
  /** Changes non-status fields (progress, statusMessage, …); with `ifStatus`, only while the status is one of those. */
  patch(
    taskId: string,
    patch: TaskPatch,
    options?: { ifStatus?: readonly ProxyTaskStatus[]; unset?: readonly (keyof TaskPatch)[] },
  ): Promise<TaskRecord | undefined>;
  delete(taskId: string): Promise<boolean>;
  /** A session's tasks in taskId order (the gateway's ids are ULIDs: oldest first). */
  listBySession(sessionId: string, query?: TaskQuery): Promise<TaskRecord[]>;
  /** The gateway task mapped onto `upstreamTaskId` of `server` in this session (indexed). */
  findByUpstreamTask(sessionId: string, server: string, upstreamTaskId: string): Promise<TaskRecord | undefined>;
  /** Every task still `working` or `input_required`, all sessions, in taskId order: what a restart must settle. */
  listWorking(): Promise<TaskRecord[]>;
  /** Deletes every task whose `retainUntil` ≤ now; returns what it deleted. */
  deleteExpired(now: number): Promise<TaskRef[]>;
  /**
   * Deletes the session's oldest ended tasks (by lastUpdatedAt) while more
   * than `maxCount` are kept or their results exceed `maxBytes`; returns the
   * deleted ids. Working tasks never count and are never deleted here.
   */
  enforceRetention(sessionId: string, retention: TaskRetention): Promise<string[]>;
  /** Deletes every task of the session (it ended); returns how many. */
  deleteBySession(sessionId: string): Promise<number>;
}

// ---------------------------------------------------------------- sessions

export type FaceRecord = { kind: "meta" } | { kind: "all" } | { kind: "server"; server: string } | { kind: "virtual"; name: string };

/** What a restart needs to resume a downstream session. */
export interface SessionRecord {
  sessionId: string;
  face: FaceRecord;
  protocolVersion: string;
  /** The client's `clientInfo` from initialize. */
  clientInfo?: Record<string, unknown>;
  /** The client's capabilities from initialize. */
  clientCapabilities: Record<string, unknown>;
  /** The level the client set with logging/setLevel. */
  logLevel?: string;
  /** Resource URIs the client subscribed to, by server. */
  subscriptions: Record<string, string[]>;
  /** The upstreams' MCP session ids (HTTP upstreams), by server. */
  upstreamSessionIds: Record<string, string>;
  /**
   * What each of those upstream sessions negotiated at initialize, by server:
   * a session continued after a restart is not initialized again, so this is
   * all the gateway knows of its capabilities.
   */
  upstreamInit?: Record<string, UpstreamInitRecord>;
  /** The principal that created the session (src/auth/): only its requests find the session, after a restart too. Absent: no one's. */
  owner?: { issuer: string; subject: string };
  createdAt: number;
  lastActivityAt: number;
}

/** An upstream's initialize result, as kept for continuing its session. */
export interface UpstreamInitRecord {
  protocolVersion: string;
  capabilities: Record<string, unknown>;
  serverInfo: { name: string; version: string } & Record<string, unknown>;
  instructions?: string;
}

export type SessionPatch = Partial<Omit<SessionRecord, "sessionId" | "createdAt">>;

export interface SessionStore {
  get(sessionId: string): Promise<SessionRecord | undefined>;
  /** Creates or replaces the record. */
  put(record: SessionRecord): Promise<void>;
  /** Atomically merges top-level fields into an existing record; undefined when there is none. */
  update(sessionId: string, patch: SessionPatch): Promise<SessionRecord | undefined>;
  /** Sets lastActivityAt (default: the store's clock); false when there is no such session. */
  touch(sessionId: string, at?: number): Promise<boolean>;
  delete(sessionId: string): Promise<boolean>;
  /** Sessions whose lastActivityAt is before `idleBefore`, least recently active first (indexed). */
  listExpired(idleBefore: number, limit?: number): Promise<SessionRecord[]>;
}

// ---------------------------------------------------------------- meta events

/** An event as the session's EventSystem makes it (`id` is its ULID, the client's cursor). */
export interface EventInput {
  id: string;
  type: string;
  server: string;
  createdAt: number;
  data: Record<string, unknown>;
}

export interface EventRecord extends EventInput {
  /** Assigned by the store: increases by one per event of the session, across restarts, never reused. */
  seq: number;
}

export interface EventLimits {
  /** Events kept per session (gateway.events.maxEvents). */
  maxPerSession: number;
  /** Events kept across all sessions (gateway.events.maxTotal). */
  maxTotal: number;
}

export interface EvictionReport {
  sessionId: string;
  /** Which bound evicted them. */
  reason: "session" | "gateway";
  count: number;
  /** Of those, how many had not been delivered (each session is told once, by its next take). */
  undelivered: number;
}

/** Undelivered events evicted since the session's last take, by bound. */
export interface EvictedCounts {
  session: number;
  gateway: number;
}

export interface EventTake {
  events: EventRecord[];
  evicted: EvictedCounts;
}

export interface EventStore {
  /**
   * Stores one event. First, as event retention has it (design EV-4): a session at
   * `maxPerSession` loses its oldest 10% (of that bound), and a gateway at
   * `maxTotal` loses its oldest 10% (of that bound) across all sessions.
   * Returns the stored event and what was evicted.
   */
  append(sessionId: string, event: EventInput, limits: EventLimits): Promise<{ event: EventRecord; evicted: EvictionReport[] }>;
  /** The undelivered events, marked delivered in the same step (exactly once, across concurrent callers and restarts), and the eviction counts (reset). */
  takeUndelivered(sessionId: string): Promise<EventTake>;
  /**
   * Cursor read: the events after the one with id `cursorId`, delivered or
   * not; an unknown cursor reads everything (`found: false`). Marks all of
   * the session's events delivered and resets the eviction counts.
   */
  takeAfter(sessionId: string, cursorId: string): Promise<EventTake & { found: boolean }>;
  /** The events after `cursorId` (all when absent or unknown), without marking anything. */
  listAfter(sessionId: string, cursorId?: string): Promise<{ events: EventRecord[]; found: boolean }>;
  /** Counts for await_activity and tests (indexed, no event is read). */
  stats(sessionId: string): Promise<{ count: number; undelivered: number; lastId?: string; evicted: EvictedCounts }>;
  /** Events stored across all sessions. */
  total(): Promise<number>;
  deleteBySession(sessionId: string): Promise<number>;
}

// ---------------------------------------------------------------- pending client requests

/** An elicitation or sampling request waiting for the session's client. */
export interface PendingRequestRecord {
  requestId: string;
  sessionId: string;
  kind: "elicitation" | "sampling";
  server: string;
  params: Record<string, unknown>;
  createdAt: number;
  expiresAt: number;
  /** The receiver task that carries the request, when the upstream sent it task-augmented. */
  taskId?: string;
}

export interface PendingRequestStore {
  /** Creates or replaces. */
  put(record: PendingRequestRecord): Promise<void>;
  get(requestId: string): Promise<PendingRequestRecord | undefined>;
  /** True for exactly one caller: whoever deletes it answers it. */
  delete(requestId: string): Promise<boolean>;
  /** Oldest first. */
  listBySession(sessionId: string, filter?: { kind?: PendingRequestRecord["kind"]; server?: string }): Promise<PendingRequestRecord[]>;
  /** Every pending request (restart recovery), oldest first. */
  listAll(): Promise<PendingRequestRecord[]>;
  /** Deletes requests whose expiresAt ≤ now; returns them (their events are the owner's to add). */
  deleteExpired(now: number): Promise<PendingRequestRecord[]>;
  deleteBySession(sessionId: string): Promise<number>;
}

// ---------------------------------------------------------------- SSE replay

export interface ReplayLimits {
  /** Messages kept per session (gateway.http.replayMaxEvents). */
  maxEvents: number;
  /** Bytes of messages kept per session (gateway.http.replayMaxBytes); the newest message is always kept. */
  maxBytes: number;
}

export interface ReplayStore {
  /** Stores one SSE message of a session's stream; returns its event id (unique within the session). */
  append(sessionId: string, streamId: string, message: Record<string, unknown>, limits: ReplayLimits): Promise<string>;
  /** The stream of an event id of this session (another session's ids are unknown here). */
  streamOf(sessionId: string, eventId: string): Promise<string | undefined>;
  /**
   * The messages of the same stream after `eventId`, oldest first (priming
   * messages, `{}`, included: the caller skips them); undefined when the id is
   * unknown in this session (evicted, or never one of its ids).
   */
  replayAfter(
    sessionId: string,
    eventId: string,
  ): Promise<{ streamId: string; messages: Array<{ eventId: string; message: Record<string, unknown> }> } | undefined>;
  /**
   * The messages of `streamId` numbered above `afterSeq`, oldest first, for a cursor naming where a stream
   * started (an unstored priming event); every event of the session numbered below `keptFrom` is gone.
   */
  replayStream(sessionId: string, streamId: string, afterSeq: number): Promise<{ keptFrom: number; messages: ReplayedMessage[] }>;
  size(sessionId: string): Promise<{ events: number; bytes: number }>;
  deleteBySession(sessionId: string): Promise<number>;
}

export type ReplayedMessage = { eventId: string; message: Record<string, unknown> };

// ---------------------------------------------------------------- runtime-added servers

/** A server added with add_server (config-file servers come from the file, not from here). */
export interface ServerRecord {
  name: string;
  config: ServerConfig;
  addedAt: number;
  /** The session id that added it. */
  addedBy: string;
  /** The principal of that session (issuer, subject), when it had one: only its sessions see the server (docs/adr/0015). */
  owner?: { issuer: string; subject: string };
}

export interface ServerStore {
  /** Creates or replaces (add_server's update). */
  put(record: ServerRecord): Promise<void>;
  get(name: string): Promise<ServerRecord | undefined>;
  /** remove_server: gone for good, also after a restart. */
  delete(name: string): Promise<boolean>;
  /** In the order they were added. */
  list(): Promise<ServerRecord[]>;
}

// ---------------------------------------------------------------- started console logins

/**
 * A console login between its two legs (OpenID Connect, src/console/oidc.ts):
 * kept from the redirect to the provider until the browser comes back, used
 * once. In the store, so the login may come back to another replica.
 */
export interface LoginStateRecord {
  /** The OAuth `state` sent to the provider (random): the key. */
  state: string;
  /** The PKCE code verifier. */
  verifier: string;
  nonce: string;
  /** SHA-256 (hex) of the browser-binding cookie set when the login started (never the cookie itself). */
  bindingHash: string;
  redirectUri: string;
  /** The console path to go to afterwards. */
  next: string;
  createdAt: number;
  expiresAt: number;
}

export interface LoginStateStore {
  /** Stores a started login (replacing one with its state); with `max` already kept, the ones that expire first are dropped to make room. */
  put(record: LoginStateRecord, max: number): Promise<void>;
  /** Returns and deletes it in one step (exactly one caller gets it); undefined when unknown, already taken, or expired at `now`. */
  take(state: string, now: number): Promise<LoginStateRecord | undefined>;
  /** Deletes the logins whose expiresAt ≤ now; returns how many. */
  deleteExpired(now: number): Promise<number>;
  /** How many are kept (expired ones not yet deleted included). */
  count(): Promise<number>;
}

// ---------------------------------------------------------------- single-use marks

/**
 * Keys that may be used once until they expire, across replicas: a sealed
 * MRTR requestState of a modern upstream (docs/adr/0032, "MRTR bridges"), so
 * that replaying it on any replica is refused. A mark is kept until its
 * expiry, then forgotten (the state itself is refused as expired by then).
 */
export interface SingleUseStore {
  /** Marks `key` used until `expiresAt`; true for the first use, false while an earlier mark is live (a replay). An expiry at or before `now` marks nothing. */
  use(key: string, expiresAt: number, now: number): Promise<boolean>;
  /** Deletes the marks whose expiresAt ≤ now; returns how many (Redis expires them itself: 0). */
  deleteExpired(now: number): Promise<number>;
}

// ---------------------------------------------------------------- governance decisions

/** What a governance decision did (docs/adr/0022-decision-pipeline.md). */
export type DecisionOutcome =
  | "allow"
  | "deny"
  | "approval_required"
  | "error"
  | "would_deny"
  | "would_require_approval"
  /** What became of an approval (docs/adr/0025-approvals.md); `decidedBy` then says who (the record's `approvedBy`). */
  | "approval_approved"
  | "approval_rejected"
  | "approval_expired"
  | "approval_cancelled";

/** One decision of the governance pipeline: the start of the audit trail. Plain JSON, append-only. */
export interface DecisionRecord {
  /** Unique, increasing with time (the gateway's id generator). */
  id: string;
  /** When it was decided (epoch ms). */
  at: number;
  outcome: DecisionOutcome;
  profile: "enforce" | "dry-run";
  /** The named profile (governance.profiles) the principal got; absent: the gateway's own settings. */
  profileName?: string;
  /** Which step decided: a visibility rule, a call rule, Cedar, or the default action. */
  decidedBy: "visibility" | "rule" | "cedar" | "default";
  /** The principal's hash (principal.ts); absent when the caller had none. */
  principalHash?: string;
  /** "meta", "server" (/servers/<name>/mcp) or "all" (/all/mcp). */
  face: string;
  /** The session id's hash, as in log lines (logging.ts sessionHash). */
  sessionHash?: string;
  server: string;
  tool: string;
  /** SHA-256 (hex) of the arguments as canonical JSON (keys sorted). */
  argumentsDigest: string;
  /** The arguments themselves, only with governance.audit.storeArguments. */
  arguments?: unknown;
  ruleId?: string;
  /** The Cedar policies that decided (or whose evaluation failed). */
  policyIds?: string[];
  /** 16 hex digits of SHA-256 of the rules and the Cedar policy text in force. */
  policyVersion: string;
  /** The evaluation error (the decision failed closed). */
  error?: string;
  /** An approval event: the approval's id, who decided (an approver's name, "expiry", "requester") and why. */
  approval?: { id: string; by: string; reason?: string };
}

/** The audit page's filters (every given field must match), a page at a time, newest first. */
export interface DecisionQuery {
  principalHash?: string | undefined;
  server?: string | undefined;
  tool?: string | undefined;
  outcome?: DecisionOutcome | undefined;
  /** Only records with `at >= since`. */
  since?: number | undefined;
  /** Only records with `at < until`. */
  until?: number | undefined;
  /** Only records older than this one (by (at, id)): the cursor of the next page. */
  before?: { at: number; id: string } | undefined;
  /** At most this many, newest first. */
  limit: number;
}

export interface DecisionStore {
  /** Appends a record; then deletes records older than `at - maxAgeMs` and the oldest beyond `maxRecords`. */
  append(record: DecisionRecord, retention: { maxAgeMs: number; maxRecords: number }): Promise<void>;
  /** Records with `at >= since`, oldest first, at most `limit`. */
  list(query?: { since?: number; limit?: number }): Promise<DecisionRecord[]>;
  /** The records matching every field `query` gives, newest first by (at, id), at most `limit` (the audit page). */
  query(query: DecisionQuery): Promise<DecisionRecord[]>;
  /** The retention sweep: deletes records with `at <= now - maxAgeMs` and the oldest beyond `maxRecords`; returns how many. */
  prune(retention: { now: number; maxAgeMs: number; maxRecords: number }): Promise<number>;
  count(): Promise<number>;
}

// ---------------------------------------------------------------- pins

/** A tool definition as it was seen: its digest (SHA-256 of canonical JSON, src/governance/pins.ts) and the definition. */
export interface PinnedDefinition {
  digest: string;
  /** description, title, inputSchema, outputSchema, annotations (JSON). */
  definition: Record<string, unknown>;
  /** When it was first seen (epoch ms). */
  at: number;
}

/** The pinned definition of one upstream tool (gateway.governance.pins, docs/adr/0029-pinned-tool-definitions.md). */
export interface PinRecord {
  server: string;
  tool: string;
  pinned: PinnedDefinition & {
    /** Who accepted it (a console user's name); absent for the first definition seen. */
    by?: string;
  };
  /** A later, different definition the upstream offers: quarantined until someone accepts it. */
  pending?: PinnedDefinition;
}

export interface PinStore {
  get(server: string, tool: string): Promise<PinRecord | undefined>;
  /** Every pin of `server` (or of all servers), by server then tool; `quarantined` only those with a pending definition. */
  list(query?: { server?: string; quarantined?: boolean }): Promise<PinRecord[]>;
  /** Pins `first` unless the tool has a pin already; returns the pin in force. Replicas racing: one wins, all see it. */
  pinIfAbsent(server: string, tool: string, first: PinnedDefinition): Promise<PinRecord>;
  /** Records a definition different from the pinned one as pending (replacing an older pending one); false when the tool has no pin or `seen` is the pinned digest. */
  quarantine(server: string, tool: string, seen: PinnedDefinition): Promise<boolean>;
  /** Pins the pending definition if its digest is still `digest` (compare-and-set); the pin in force after, or undefined when there was no such pending definition. */
  accept(server: string, tool: string, digest: string, by: string, at: number): Promise<PinRecord | undefined>;
}

// ---------------------------------------------------------------- rate limits

/** One token bucket a call must take from (gateway.rateLimits; src/store/token-bucket.ts). */
export interface RateBucketSpec {
  /** Which bucket: the limit's name with the parts of the call its scope counts by. */
  key: string;
  /** Tokens a full bucket holds (the burst). */
  capacity: number;
  /** Tokens regained per second. */
  refillPerSecond: number;
}

export interface RateTakeResult {
  /** A token was taken from every bucket. */
  ok: boolean;
  /** When refused: the index of the first bucket without a token. */
  refused?: number;
  /** When refused: milliseconds until every refusing bucket holds a token again. */
  retryAfterMs: number;
}

export interface RateLimitStore {
  /**
   * Takes one token from each bucket, atomically and all or nothing: refused
   * when any bucket is empty, and then nothing is taken. Buckets not used
   * until they would be full again are forgotten (a missing bucket is full).
   */
  take(buckets: readonly RateBucketSpec[], now: number): Promise<RateTakeResult>;
}

// ---------------------------------------------------------------- upstream credentials (the vault)

/** Which credential: whose (a principal's issuer and subject; the gateway's own: both ""), for which upstream, what. */
export interface CredentialKey {
  issuer: string;
  subject: string;
  /** The upstream (server name). */
  upstream: string;
  /** `oauth` (a grant's tokens), `secret:<name>` (a per-user value), `client:<authorization server>` (a dynamic registration, the gateway's own). */
  slot: string;
}

/**
 * A credential as stored: the secret part sealed by the vault
 * (src/upstream/auth/vault.ts, AES-256-GCM), opaque to the store.
 */
export interface CredentialRecord extends CredentialKey {
  /** The id of the vault key that sealed it (rotation re-seals the others). */
  keyId: string;
  /** base64url of nonce, ciphertext and tag. */
  sealed: string;
  /** What may be shown (never a token): scopes granted, when the access token expires, the authorization server. */
  info?: { scopes?: string[]; expiresAt?: number; authIssuer?: string };
  updatedAt: number;
}

export interface CredentialStore {
  /** Creates or replaces. */
  put(record: CredentialRecord): Promise<void>;
  /** Replaces the record only while the stored one is still sealed as `expectedSealed` (compare-and-set on what was read); false when it changed or is gone. */
  replaceIf(record: CredentialRecord, expectedSealed: string): Promise<boolean>;
  get(key: CredentialKey): Promise<CredentialRecord | undefined>;
  delete(key: CredentialKey): Promise<boolean>;
  /** A principal's credentials, by upstream then slot. */
  listByPrincipal(issuer: string, subject: string): Promise<CredentialRecord[]>;
  /** At most `limit` credentials sealed with another key than `keyId` (what a rotation re-seals). */
  listNotSealedWith(keyId: string, limit: number): Promise<CredentialRecord[]>;
}

/**
 * An OAuth authorization started for an upstream (src/upstream/auth/): kept
 * from the authorization URL until the callback, used once. In the store, so
 * the callback may reach another replica.
 */
export interface OAuthFlowRecord {
  /** The OAuth `state` (random): the key. */
  state: string;
  /** The principal it is for; only they may complete it. */
  issuer: string;
  subject: string;
  upstream: string;
  /** The authorization server's issuer: the callback's `iss` must equal it (RFC 9207). */
  authIssuer: string;
  /** Whether its metadata advertised `authorization_response_iss_parameter_supported` when the flow started: then a callback without `iss` is refused (absent in flows stored before it was recorded: read as false). */
  issRequired?: boolean;
  clientId: string;
  /** The PKCE code verifier, sealed by the vault (`keyId` names the key). */
  verifierSealed: string;
  keyId: string;
  redirectUri: string;
  /** The RFC 8707 resource (the upstream's URL as its metadata names it). */
  resource: string;
  /** The Protected Resource Metadata URL the upstream's 401 named (any path): the callback, on any replica, discovers from it, not from the well-known ones. */
  resourceMetadataUrl?: string;
  scopes: string[];
  createdAt: number;
  expiresAt: number;
}

export interface OAuthFlowStore {
  /** Stores a started flow (replacing one with its state); with `max` kept, the ones that expire first make room. */
  put(record: OAuthFlowRecord, max: number): Promise<void>;
  /** Returns and deletes it in one step (exactly one caller gets it); undefined when unknown, taken, or expired at `now`. */
  take(state: string, now: number): Promise<OAuthFlowRecord | undefined>;
  /** Reads it without taking it (to check whose it is first); undefined when unknown, taken, or expired at `now`. */
  peek(state: string, now: number): Promise<OAuthFlowRecord | undefined>;
  /** Deletes the flows whose expiresAt ≤ now; returns how many. */
  deleteExpired(now: number): Promise<number>;
  count(): Promise<number>;
}

// ---------------------------------------------------------------- leases

/**
 * Short exclusive holds on named jobs, shared by replicas: one refresh of a person's upstream grant at a time
 * (src/upstream/auth/upstream-oauth.ts, docs/adr/0027 §17). A holder renews it while its job runs; one that dies
 * (stops renewing) lets it lapse at its expiry.
 */
export interface LeaseStore {
  /** Takes `key` for `holder` until `now + ttlMs` when nobody holds it or the last hold has lapsed; true when taken. (Redis times it on its own clock.) */
  acquire(key: string, holder: string, now: number, ttlMs: number): Promise<boolean>;
  /** Extends `holder`'s hold of `key` to `now + ttlMs` (a heartbeat while the job runs); false when it no longer holds it (lapsed, taken, given back). */
  renew(key: string, holder: string, now: number, ttlMs: number): Promise<boolean>;
  /** Gives `key` back when `holder` still holds it; true when it did. */
  release(key: string, holder: string): Promise<boolean>;
}

// ---------------------------------------------------------------- approvals

/** Where a human approval stands (docs/adr/0025-approvals.md). */
export type ApprovalState = "pending" | "approved" | "rejected" | "expired" | "cancelled";

/** A tool call waiting for (or past) a person's decision; its gateway task is `taskId` of session `sessionId`. Plain JSON. */
export interface ApprovalRecord {
  id: string;
  taskId: string;
  sessionId: string;
  /** The face the call came through ("meta", "server", "all", "virtual"). */
  face: string;
  /** Who asked: the principal's hash, issuer and subject; absent when the caller had none. */
  requester?: { hash: string; issuer: string; subject: string };
  /** The client's name and version from initialize, when it gave them. */
  client?: string;
  server: string;
  tool: string;
  /** The call's arguments as sent upstream: kept to run the call once approved (and shown to approvers); dropped when it ends unless audit.storeArguments. */
  arguments?: Record<string, unknown>;
  /** SHA-256 (hex) of the arguments as canonical JSON: the approval is for exactly these. */
  argumentsDigest: string;
  /** The policy version in force when approval was asked. */
  policyVersion: string;
  /** The rule that asked for approval (`defaultAction` when none matched). */
  ruleId: string;
  createdAt: number;
  expiresAt: number;
  state: ApprovalState;
  /** Who decided: the approver's name, "expiry" or "requester" (a cancel). */
  decidedBy?: string;
  decidedAt?: number;
  reason?: string;
  /** When one process took the approved call to run it (exactly one does). */
  claimedAt?: number;
}

export interface ApprovalStore {
  create(record: ApprovalRecord): Promise<void>;
  get(id: string): Promise<ApprovalRecord | undefined>;
  /** Oldest first (createdAt, id), only the given states if any, at most `limit`. */
  list(query?: { states?: readonly ApprovalState[]; limit?: number }): Promise<ApprovalRecord[]>;
  /**
   * Compare-and-set: applies `patch` (and removes `unset`) only while the state is one of
   * `ifState` (and, with `ifUnclaimed`, no claimedAt is set); returns the new record, or
   * undefined when unknown or the condition failed. Exactly one of racing callers wins.
   */
  update(
    id: string,
    patch: Partial<Pick<ApprovalRecord, "state" | "decidedBy" | "decidedAt" | "reason" | "claimedAt">>,
    condition: { ifState: readonly ApprovalState[]; ifUnclaimed?: boolean; unset?: readonly "arguments"[] },
  ): Promise<ApprovalRecord | undefined>;
  /** Deletes approvals that are no longer pending and were created before `before`; returns how many. */
  deleteEndedBefore(before: number): Promise<number>;
}

// ---------------------------------------------------------------- activity

/** What an activity record tells (docs/design/console.md, "Activity"). */
export type ActivityKind =
  | "tool_call"
  | "task"
  | "elicitation"
  | "sampling"
  | "server_connected"
  | "server_disconnected"
  | "server_failed"
  | "startup_check"
  | "config_reload"
  | "console_action";

/** One thing that happened at the gateway, for people to look back at (the console's Activity page). Plain JSON, append-only. */
export interface ActivityRecord {
  /** Unique, increasing with time (the gateway's id generator). */
  id: string;
  /** When it happened (epoch ms). */
  at: number;
  kind: ActivityKind;
  /** "ok", "error", "cancelled", "promoted", "completed", "failed", "answered", "expired", … (by kind). */
  outcome?: string;
  server?: string;
  tool?: string;
  /** The session's hash (logging.ts sessionHash), never its id. */
  sessionHash?: string;
  /** The principal's hash; absent when the caller had none. */
  principalHash?: string;
  taskId?: string;
  durationMs?: number;
  /** One line for people: what happened, who answered, the reason of a failure. */
  summary?: string;
}

export interface ActivityQuery {
  kind?: ActivityKind | undefined;
  server?: string | undefined;
  sessionHash?: string | undefined;
  principalHash?: string | undefined;
  outcome?: string | undefined;
  taskId?: string | undefined;
  /** Only records with `at >= since`. */
  since?: number | undefined;
  /** Only records older than this one (by (at, id)): the next page. */
  before?: { at: number; id: string } | undefined;
  /** At most this many, newest first. */
  limit: number;
}

export interface ActivityStore {
  /** Appends records (one batch, one write); then deletes those older than `now - maxAgeMs` and the oldest beyond `maxRecords`. */
  append(records: readonly ActivityRecord[], retention: { now: number; maxAgeMs: number; maxRecords: number }): Promise<void>;
  /** The records matching every given field, newest first (at, id), at most `limit`. */
  list(query: ActivityQuery): Promise<ActivityRecord[]>;
  count(): Promise<number>;
}

// ---------------------------------------------------------------- the bundle

export interface Store {
  readonly kind: "memory" | "sqlite" | "redis";
  /** Where the data lives (a file path for SQLite, the URL without its password for Redis), for log lines and errors. */
  readonly location: string;
  readonly tasks: TaskStore;
  readonly sessions: SessionStore;
  readonly events: EventStore;
  readonly pending: PendingRequestStore;
  readonly replay: ReplayStore;
  readonly servers: ServerStore;
  readonly logins: LoginStateStore;
  readonly singleUse: SingleUseStore;
  readonly decisions: DecisionStore;
  readonly approvals: ApprovalStore;
  readonly activity: ActivityStore;
  readonly rateLimits: RateLimitStore;
  readonly credentials: CredentialStore;
  readonly oauthFlows: OAuthFlowStore;
  readonly leases: LeaseStore;
  readonly pins: PinStore;
  /** False when the backend cannot serve (closed, file gone bad, disk full); never throws. */
  healthy(): Promise<boolean>;
  /** Why the last healthy() (or a failed write) found the backend unable to serve, with what to do; undefined when it can. */
  problem?(): string | undefined;
  /** A served SQLite store: records the port this process serves on, named to a gateway refused the same file. */
  announce?(owner: { port: number }): Promise<void>;
  /** Flushes and releases the backend; idempotent. Every method afterwards fails with EMCP_CLOSED. */
  close(): Promise<void>;
}
