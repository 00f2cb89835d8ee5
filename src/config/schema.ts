/**
 * The one config schema. Every default lives here; unknown keys are rejected
 * (strict objects) so a typo fails at start with the key's path in the message.
 * The file format is the `mcpServers` JSON used by Claude Desktop / Cursor plus
 * an optional `gateway` section.
 */
import { z } from "zod";
import { DEFAULT_HOST, DEFAULT_LOG_LEVEL, DEFAULT_PORT } from "./cli-defaults.js";
import { mcpServersSchema, sharingMode, type ServerConfig, type SharingMode } from "./server-entry.js";
import { codeModeSchema } from "./code-mode.js";
import { governanceSchema } from "./governance.js";
import { rateLimitSchema } from "./rate-limits.js";
import { DEFAULT_DENIED_URLS, urlPatternProblem } from "./url-patterns.js";
import { vaultSchema } from "./vault.js";

const positiveMs = z.number().int().positive();

const urlPattern = z.string().superRefine((text, ctx) => {
  const problem = urlPatternProblem(text);
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
});

const publicUrlSchema = z
  .url({ protocol: /^https?$/, error: "must be an http:// or https:// URL, e.g. https://mcp.example.com or https://example.com/gateway" })
  .refine((u) => !/[?#]/.test(u), { message: "must have no query or fragment, e.g. https://mcp.example.com/gateway" });

/** An OAuth scope token (RFC 6749 §3.3: printable ASCII but space, quote and backslash). */
const scopeToken = z
  .string()
  .regex(/^[\x21\x23-\x5B\x5D-\x7E]+$/, "a scope is one token of printable characters without spaces, quotes or backslashes, e.g. mcp:tools");

const oauthSchema = z
  .strictObject({
    /** Authorization servers whose access tokens are accepted (their `iss`), e.g. https://login.example.com/realms/mcp. Empty: OAuth is off. */
    issuers: z.array(publicUrlSchema).default([]),
    /** Scopes every token must carry (403 insufficient_scope otherwise); also what Protected Resource Metadata offers. */
    scopes: z.array(scopeToken).default([]),
    /** Audiences accepted besides the face's own resource URL (for servers without RFC 8707 resource indicators), e.g. "api://emceepee". */
    audiences: z.array(z.string().min(1)).default([]),
    /** Leeway for `exp` / `nbf` / `iat` between the issuer's clock and ours. */
    clockSkewMs: z.number().int().min(0).max(300_000).default(30_000),
    /**
     * The JWT `typ` header an access token must carry: "at+jwt" (RFC 9068; `application/at+jwt` too), or "any" for
     * servers that do not set it (tokens that look like OpenID ID tokens are refused then: `nonce`, `at_hash`, `c_hash`).
     */
    jwtType: z.enum(["at+jwt", "any"]).default("at+jwt"),
    /** RFC 7662 token introspection for opaque (non-JWT) access tokens; off without `endpoint`. */
    introspection: z
      .strictObject({
        endpoint: publicUrlSchema.optional(),
        /** The gateway's own client credentials at the authorization server (HTTP Basic). */
        clientId: z.string().min(1).optional(),
        clientSecret: z.string().min(1).optional(),
        /** An active answer is reused this long, never past the token's `exp`. */
        cacheMs: z.number().int().min(0).max(3_600_000).default(60_000),
        /** An inactive answer ("not active") is reused this long (a negative cache: short, so a fresh token is not refused long). */
        negativeCacheMs: z.number().int().min(0).max(60_000).default(5_000),
        /** false: an active answer without `aud` is accepted (for servers that omit it); else it must name this resource, as a JWT's. */
        requireAudience: z.boolean().default(true),
        /** Answers kept at most, active and inactive ones apart (the oldest of each are dropped first). */
        cacheMaxEntries: z.number().int().positive().default(10_000),
      })
      .refine((i) => i.endpoint === undefined || (i.clientId !== undefined && i.clientSecret !== undefined), {
        message:
          "introspection.endpoint needs clientId and clientSecret (the gateway's own credentials at the authorization server); add them, or remove endpoint",
        path: ["endpoint"],
      })
      .prefault({}),
  })
  .refine((o) => o.issuers.length > 0 || (o.scopes.length === 0 && o.audiences.length === 0 && o.introspection.endpoint === undefined), {
    message: 'OAuth settings need issuers, the authorization servers whose tokens to accept, e.g. issuers: ["https://login.example.com"]',
    path: ["issuers"],
  });

/** Claim values (of `roleClaim`) that give a console role. */
const roleValues = z.array(z.string().min(1)).default([]);

/** The console's OpenID Connect login (docs/config.md, "Console login"). */
const consoleOidcSchema = z
  .strictObject({
    /** The OpenID provider. Absent: the first of auth.oauth.issuers (the same issuer as the MCP endpoints). */
    issuer: publicUrlSchema.optional(),
    /** The console's client at the provider (a web client with redirect URI <public URL>/console/callback). Absent: no OIDC login. */
    clientId: z.string().min(1).optional(),
    /** Its secret (client_secret_post); absent: a public client (PKCE alone). Use "${EMCEEPEE_CONSOLE_CLIENT_SECRET}". */
    clientSecret: z.string().min(1).optional(),
    /** Scopes asked for at login; openid is always included. */
    scopes: z.array(scopeToken).default(["openid"]),
    /** Where the provider sends the person back. Absent: <this gateway's external URL>/console/callback (gateway.http.publicUrl or the request's Host). */
    redirectUrl: publicUrlSchema.optional(),
    /** The ID token claim naming the person's roles or groups (a string or an array of strings). */
    roleClaim: z.string().min(1).default("roles"),
    /** Which values of roleClaim give which role; the highest matching role wins. */
    roles: z.strictObject({ admin: roleValues, answerer: roleValues, viewer: roleValues }).prefault({}),
    /** The role of a person no value matched: "none" refuses the login. */
    defaultRole: z.enum(["admin", "answerer", "viewer", "none"]).default("answerer"),
    /** A console login lasts this long (then the person logs in again). */
    sessionTtlMs: positiveMs.default(8 * 3_600_000),
    /** Console logins kept at most (in this replica's memory; the oldest go first). */
    maxSessions: z.number().int().positive().default(10_000),
    /** A started login must come back from the provider within this. */
    loginTtlMs: positiveMs.default(600_000),
    /** Started, unfinished logins kept at most (the oldest go first). */
    maxPendingLogins: z.number().int().positive().default(1_000),
    /** Logins one client address may start per console.loginWindowMs; then 429 with Retry-After (so no one address can push out others' started logins). */
    maxLoginStartsPerAddress: z.number().int().positive().default(20),
  })
  .refine((o) => o.clientId !== undefined || (o.clientSecret === undefined && o.issuer === undefined && o.redirectUrl === undefined), {
    message:
      "console.oidc needs clientId (the console's client at the OpenID provider) to turn the login on; add it, or remove issuer, clientSecret and redirectUrl",
    path: ["clientId"],
  });

export const gatewaySettingsSchema = z.strictObject({
  host: z.string().default(DEFAULT_HOST),
  port: z.number().int().min(0).max(65535).default(DEFAULT_PORT),
  /** Bearer token required on every HTTP request when set. */
  token: z.string().min(16, "token must be at least 16 characters").optional(),
  /** Extra Host header values accepted besides loopback names (DNS-rebinding protection). */
  allowedHosts: z.array(z.string()).default([]),
  /** Origins accepted on browser requests besides loopback origins. */
  allowedOrigins: z.array(z.string()).default([]),
  logLevel: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]).default(DEFAULT_LOG_LEVEL),
  /** One `tool_call` line at info per tool call (meta and transparent faces); false turns it off. */
  accessLog: z.boolean().default(true),
  /**
   * What clients may change at runtime with add_server / remove_server
   * (docs/adr/0006-runtime-server-management.md). Whatever these say, a
   * gateway bound beyond loopback without a token refuses every runtime change.
   */
  servers: z
    .strictObject({
      /** add_server with `command`: a client may start programs on the gateway's host. Off: stdio servers come from the config file only. */
      allowRuntimeStdio: z.boolean().default(false),
      /** add_server with `url`: the gateway connects to a URL the client chose (it can reach what the gateway's host can reach). */
      allowRuntimeRemote: z.boolean().default(true),
      /** remove_server of a config-file server, and add_server replacing one with another config. */
      allowConfigServerChanges: z.boolean().default(false),
      /** add_server / remove_server changing a server another session added at runtime (docs/adr/0015). Off: only the session that added it. */
      allowCrossSessionChanges: z.boolean().default(false),
      /** Which URLs add_server may use (docs/adr/0015): hosts, `*.` subdomains, IP addresses, CIDR ranges or http(s) URL prefixes. */
      runtimeUrls: z
        .strictObject({
          /** Empty: any URL not denied; else a URL must match one of these (IP/CIDR: every address its host resolves to). */
          allow: z.array(urlPattern).default([]),
          /** Refused when the host, the URL or any resolved address matches; replacing the list drops the defaults. */
          deny: z.array(urlPattern).default([...DEFAULT_DENIED_URLS]),
        })
        .prefault({}),
    })
    .prefault({}),
  tools: z
    .strictObject({
      /** execute_tool waits this long before promoting the call to a task. */
      defaultTimeoutMs: positiveMs.default(120_000),
      /** Largest upstream tool `arguments` object accepted, as JSON bytes (stdio has no body limit). */
      maxArgumentsBytes: z
        .number()
        .int()
        .positive()
        .default(1024 * 1024),
    })
    .prefault({}),
  tasks: z
    .strictObject({
      defaultTtlMs: positiveMs.default(300_000),
      maxTtlMs: positiveMs.default(1_800_000),
      completedRetentionMs: positiveMs.default(300_000),
      maxTasksPerSession: z.number().int().positive().default(100),
      /**
       * Working tasks plus calls that may become one, across all sessions of one principal (OAuth
       * user) on this replica (docs/adr/0018, "Limits per principal"); 0 turns it off. The static
       * token's "operator" is exempt.
       */
      maxPerPrincipal: z.number().int().min(0).default(500),
      /** Ended tasks kept per session (the oldest are deleted first beyond either bound). */
      maxRetainedPerSession: z.number().int().positive().default(200),
      maxRetainedResultBytes: z
        .number()
        .int()
        .positive()
        .default(64 * 1024 * 1024),
      /** Cancelling an upstream task (on cancel, expiry, shutdown) is best effort within this bound. */
      upstreamCancelTimeoutMs: positiveMs.default(5_000),
      /**
       * An emulated call (a plain tools/call of a task-only tool) whose client gave a progress
       * token gets a progress notification at least this often (ADR 0002 §7).
       */
      progressKeepAliveMs: positiveMs.default(15_000),
    })
    .prefault({}),
  pendingRequests: z
    .strictObject({
      /** Elicitations and sampling requests wait this long for the client. */
      timeoutMs: positiveMs.default(600_000),
      maxPerSession: z.number().int().positive().default(100),
    })
    .prefault({}),
  /** MCP 2026-07-28 multi round-trip requests through the gateway (ADR 0032, "MRTR bridges"). */
  mrtr: z
    .strictObject({
      /** A legacy upstream's elicitation / sampling / roots request parked for a modern client waits this long for its retry; then the call is cancelled upstream. */
      parkTtlMs: positiveMs.default(60_000),
      /** A sealed requestState the gateway hands a modern client may be presented this long. */
      stateTtlMs: positiveMs.default(600_000),
      /** Calls parked at once on this replica (EMCP_LIMIT_REACHED beyond). */
      maxParked: z.number().int().positive().default(1000),
    })
    .prefault({}),
  events: z
    .strictObject({
      maxEvents: z.number().int().min(10).default(1000),
      warningThreshold: z.number().gt(0).lte(1).default(0.8),
      /** Gateway-wide cap on stored events across all sessions (design EV-4): beyond it the oldest 10% gateway-wide are evicted. */
      maxTotal: z.number().int().min(10).default(10_000),
    })
    .prefault({}),
  buffers: z
    .strictObject({
      maxNotificationsPerServer: z.number().int().positive().default(100),
      maxLogsPerServer: z.number().int().positive().default(500),
    })
    .prefault({}),
  sessions: z
    .strictObject({
      idleTimeoutMs: positiveMs.default(1_800_000),
      /**
       * The first exchange: every HTTP request of a session within this long of
       * its initialize. A request after it means the client came back: the
       * session is established and expires after idleTimeoutMs.
       */
      firstExchangeMs: positiveMs.default(10_000),
      /** A session whose client never came back after its first exchange expires this long after its last request. */
      oneShotIdleMs: positiveMs.default(60_000),
      sweepIntervalMs: positiveMs.default(60_000),
      maxSessions: z.number().int().positive().default(1000),
      /**
       * Sessions one principal (OAuth user) may hold on this replica (docs/adr/0018, "Limits per
       * principal"); beyond it `initialize` is refused (EMCP_PRINCIPAL_LIMIT, HTTP 429). 0 turns
       * it off. The static token's "operator" is exempt.
       */
      maxPerPrincipal: z.number().int().min(0).default(100),
      /**
       * Meta faces attached to one session with `?session=<id>` at once; beyond it
       * `initialize` is refused (EMCP_LIMIT_REACHED). An attachment idle (no open
       * response) for oneShotIdleMs gives its slot to a new one.
       */
      maxAttachmentsPerSession: z.number().int().positive().default(16),
    })
    .prefault({}),
  awaitActivity: z
    .strictObject({
      defaultTimeoutMs: positiveMs.default(30_000),
      maxTimeoutMs: positiveMs.default(600_000),
    })
    .prefault({}),
  /** search_tools (docs/adr/0026). */
  toolSearch: z
    .strictObject({
      /** How long a search waits for servers the session has not connected yet (they keep connecting; the reply names them). */
      connectWaitMs: z.number().int().min(0).max(60_000).default(2_000),
    })
    .prefault({}),
  /** set_timer (design MF-22). */
  timers: z
    .strictObject({
      /** Timers one session may have running at once (EMCP_LIMIT_REACHED beyond). */
      maxPerSession: z.number().int().positive().max(1000).default(20),
    })
    .prefault({}),
  upstream: z
    .strictObject({
      /**
       * Meta-face sessions connect every server when they start (the previous
       * design). Off: a session connects a server when it first needs it.
       */
      eagerConnect: z.boolean().default(false),
      /** Connecting (spawn + initialize) must finish within this. */
      connectTimeoutMs: positiveMs.default(30_000),
      /** Timeout for short upstream requests (lists, reads, prompts). */
      requestTimeoutMs: positiveMs.default(60_000),
      /** Bound on one lazy tasks/get poll of an upstream task (design TK-10); on timeout the client may retry and the task is unchanged (TK-11). */
      taskPollTimeoutMs: positiveMs.default(10_000),
      /** Gateway-wide cap on running stdio upstream processes. */
      maxChildProcesses: z.number().int().positive().default(256),
      /**
       * Ending a stdio upstream: after its stdin closes it has this long to exit;
       * then its whole process group gets SIGTERM, and SIGKILL this long later.
       */
      killGraceMs: positiveMs.default(2_000),
      /**
       * Largest message read from an upstream (a response, request or
       * notification), in bytes, on every transport; counted as the bytes
       * arrive. Over it the call fails with EMCP_RESPONSE_TOO_LARGE and the
       * message is dropped unparsed (design LM-6). Not settable per server: a
       * client's add_server could raise it.
       */
      maxMessageBytes: z
        .number()
        .int()
        .min(1024)
        .default(16 * 1024 * 1024),
      /**
       * How an upstream whose entry has no `sharing` key is used (docs/adr/0010):
       * `session` — one connection (for stdio, one process) per downstream
       * session; `shared` — one connection serves every session of the gateway.
       */
      sharing: z
        .strictObject({
          stdio: sharingMode.default("session"),
          remote: sharingMode.default("session"),
        })
        .prefault({}),
      /**
       * Stdio upstreams in session mode (`serve` only): once a session has used
       * a server, up to this many of its processes are kept spawned ahead
       * (initialize runs when a session takes one), so the next sessions' first
       * calls do not wait for a spawn: as many as sessions took in the last
       * warmPoolWindowMs (at least one). They count against maxChildProcesses. 0: off.
       */
      warmPool: z.number().int().min(0).max(64).default(1),
      /** The warm pool follows how many processes sessions took in this window (docs/adr/0034). */
      warmPoolWindowMs: positiveMs.default(30_000),
      /** A server whose processes no session took for this long keeps none waiting (docs/adr/0034). */
      warmPoolIdleMs: positiveMs.default(300_000),
      /**
       * A session connection (session mode) unused this long, with nothing
       * running or subscribed on it, is closed — its process ends — and
       * reconnects on next use. 0 keeps connections for the session's life.
       */
      idleReleaseMs: z.number().int().min(0).default(300_000),
      /**
       * Remote upstreams: while requests are in flight, ping this often; two
       * pings in a row unanswered within pingTimeoutMs, with nothing else heard
       * from the upstream meanwhile, are a drop (design UP-12).
       * 0: off (only transport errors reveal a lost upstream).
       */
      livenessPingMs: z.number().int().min(0).default(15_000),
      /** Bound on each ping that checks a remote upstream (liveness, or after a transport error); requestTimeoutMs if shorter. */
      pingTimeoutMs: positiveMs.default(10_000),
      /** After an upstream drops, the session reconnects in the background with capped exponential backoff. */
      reconnect: z
        .strictObject({
          initialDelayMs: positiveMs.default(500),
          maxDelayMs: positiveMs.default(30_000),
          jitter: z.number().min(0).max(1).default(0.3),
          /** 0 turns background reconnection off (connections are still retried on next use). */
          maxAttempts: z.number().int().min(0).default(8),
          /** A reconnected upstream must stay up this long before the backoff starts over; one that drops sooner (a crash loop) goes on counting attempts. */
          stableAfterMs: positiveMs.default(30_000),
        })
        .prefault({}),
    })
    .prefault({}),
  /** The web console at /console (src/console/, docs/adr/0012-console.md): behind the same Host/Origin/token guards. */
  console: z
    .strictObject({
      enabled: z.boolean().default(true),
      /** Wrong tokens one client address may send to /console/login per `loginWindowMs`; then 429 with Retry-After until the window ends. */
      loginMaxFailures: z.number().int().positive().default(5),
      loginWindowMs: positiveMs.default(60_000),
      /** People log in with OpenID Connect (code + PKCE, src/console/oidc.ts) when clientId is set; else the static token's login only. */
      oidc: consoleOidcSchema.prefault({}),
    })
    .prefault({}),
  /** What happened at the gateway, kept for the console's Activity and Upstreams pages (src/session/activity-log.ts, store kind `activity`). */
  activity: z
    .strictObject({
      /** false: nothing is recorded (the pages say so). */
      enabled: z.boolean().default(true),
      /** Records older than this are deleted (at each write). */
      maxAgeMs: positiveMs.default(7 * 24 * 60 * 60_000),
      /** At most this many records are kept, the oldest deleted first. */
      maxRecords: z.number().int().positive().default(50_000),
      /** Records wait at most this long to be written, in one batch. */
      flushMs: positiveMs.default(250),
      /** Records waiting to be written; beyond it new ones are dropped and counted (a slow store never slows a call or grows memory). */
      maxQueued: z.number().int().positive().default(2_000),
    })
    .prefault({}),
  /** Prometheus metrics (src/observability, docs/adr/0011-observability.md), served after the Host/Origin/token guards. */
  metrics: z
    .strictObject({
      /** false: no registry, no /metrics page, no taps for metrics (tracing is set by OTEL_* alone). */
      enabled: z.boolean().default(true),
      /** Principals (hashes) labelled in emceepee_principal_requests_total; later ones count as "other". 0: no such counter. */
      principals: z.number().int().min(0).max(10_000).default(0),
      /** Where GET answers in the Prometheus text format. */
      path: z
        .string()
        .regex(/^\/[A-Za-z0-9._~\-/]*$/, "path must start with / and hold only URL path characters, e.g. /metrics")
        // The page is tried before the MCP endpoints: it must not hide one of them, a probe or the console.
        .refine((p) => !/^\/(mcp|all\/mcp|servers\/.*|healthz|readyz|console(\/.*)?)$/.test(p), {
          message:
            "path is taken by an MCP endpoint, a probe or the console (/mcp, /all/mcp, /servers/…, /healthz, /readyz, /console); pick another, e.g. /metrics",
        })
        .default("/metrics"),
    })
    .prefault({}),
  transparent: z
    .strictObject({
      /** Joins server and item names on the aggregated /all/mcp face. */
      separator: z.string().min(1).max(8).default("__"),
      /**
       * How long /all/mcp's initialize and lists wait for an upstream to connect;
       * one that takes longer (or fails) is listed as missing, keeps connecting in
       * the background, and is not waited for again (design TF-10).
       */
      aggregateWaitMs: positiveMs.default(5_000),
      /**
       * /servers/<name>/mcp: initialize answers from what the upstream answered
       * when last connected (the start-up check, another session) and connects
       * on first use; false connects at initialize (docs/adr/0034).
       */
      lazyInitialize: z.boolean().default(true),
      /**
       * The relay fast path (docs/adr/0037): a plain request is answered without the SDK's
       * HTTP transport — one JSON body with http.plainJsonResponses, else one stored SSE event.
       */
      fastPath: z.boolean().default(true),
    })
    .prefault({}),
  http: z
    .strictObject({
      maxBodyBytes: z
        .number()
        .int()
        .positive()
        .default(4 * 1024 * 1024),
      /** Per session: SSE messages kept for Last-Event-ID replay (oldest dropped beyond either bound). */
      replayMaxEvents: z.number().int().positive().default(1000),
      replayMaxBytes: z
        .number()
        .int()
        .positive()
        .default(8 * 1024 * 1024),
      /** An SSE comment frame on every open SSE stream this often, so proxies and idle timeouts keep it open (0: none). */
      sseKeepAliveMs: z.number().int().min(0).default(15_000),
      /** How long a server→client request that belongs to no call waits for the client's standalone GET stream before the upstream gets EMCP_CLIENT_UNREACHABLE (docs/adr/0047). */
      standaloneStreamWaitMs: z.number().int().positive().default(10_000),
      /** Answer a plain request (no progress token, no task, a client that cannot be asked anything) with JSON, not an SSE stream: nothing stored for replay, but a dropped connection loses the answer (docs/adr/0035). */
      plainJsonResponses: z.boolean().default(false),
      /** How long an idle keep-alive connection stays open (Node's default, 5 s, races clients and proxies that reuse it later: ECONNRESET). */
      keepAliveTimeoutMs: z.number().int().min(1_000).max(3_600_000).default(65_000),
      /** A POST body nested deeper than this (arrays and objects) is refused with 400 before anything parses it further. */
      maxJsonDepth: z.number().int().min(8).max(4_000).default(2_048),
      /** How clients reach this gateway (behind TLS offload or a path prefix): OAuth resource URLs are built on it (src/auth/resource-url.ts). */
      publicUrl: publicUrlSchema.optional(),
      /** Without publicUrl: take the scheme and host from X-Forwarded-Proto / X-Forwarded-Host (only behind a proxy that sets them). */
      trustForwardedHeaders: z.boolean().default(false),
    })
    .prefault({}),
  /** Who may call (src/auth/, docs/adr/0018-inbound-identity.md): `token` above is the static one; `oauth` makes this an OAuth 2.1 resource server. */
  auth: z
    .strictObject({
      oauth: oauthSchema.prefault({}),
      /**
       * Log lines and spans of a request carry its principal's subject (and `email` claim) beside the hash
       * (src/observability/principal-telemetry.ts). Off: only the hash, never the subject, e-mail or token.
       */
      logSubject: z.boolean().default(false),
    })
    .prefault({}),
  /** The vault of per-principal upstream credentials (src/upstream/auth/, docs/config.md#vault). */
  vault: vaultSchema,
  /**
   * Where sessions, tasks, events, pending requests, SSE replay and runtime-added
   * servers are kept (src/store/, docs/adr/0007-durable-store.md). `memory`
   * (the default for the library and tests: nothing touches the user's files)
   * or `sqlite` at `path` (absent: the per-user state file, defaultStorePath()),
   * or `redis` at `url` (replicas share it: docs/adr/0013-replicas.md).
   * `emceepee serve` is meant to default to sqlite at that path.
   */
  store: z
    .strictObject({
      kind: z.enum(["memory", "sqlite", "redis"]).default("memory"),
      path: z.string().min(1).optional(),
      /** kind "redis": redis://[user:password@]host[:port][/db], or rediss:// for TLS. */
      url: z.string().min(1).optional(),
      /** kind "redis": prepended to every key (several gateways, or other data, in one Redis). */
      keyPrefix: z.string().min(1).default("emceepee:"),
    })
    .refine((s) => s.kind === "sqlite" || s.path === undefined, {
      message: 'path is only used with kind "sqlite" (a memory store has no file); remove it or set kind: "sqlite"',
      path: ["path"],
    })
    .refine((s) => (s.kind === "redis") === (s.url !== undefined), {
      message: 'url is required with kind "redis" (redis://host:6379) and only used with it; add it, or remove it and pick another kind',
      path: ["url"],
    })
    .refine((s) => s.url === undefined || /^rediss?:\/\/[^/?#]/i.test(s.url), {
      message: "url must be a redis:// or rediss:// URL with a host, e.g. redis://localhost:6379 or rediss://user:password@redis.internal:6380/0",
      path: ["url"],
    })
    .prefault({}),
  /**
   * Several replicas sharing one Redis store (docs/adr/0013-replicas.md): each
   * session's live state has one owner replica; others forward its requests
   * there, or adopt it from the store when the owner's heartbeat expired.
   */
  cluster: z
    .strictObject({
      enabled: z.boolean().default(false),
      /** Names this replica in logs and owner records (a random suffix is added per start). Absent: host name and pid. */
      replicaId: z
        .string()
        .regex(/^[A-Za-z0-9._-]{1,64}$/, "replicaId must be 1-64 letters, digits, dots, dashes or underscores")
        .optional(),
      /** How the other replicas reach this one over HTTP, e.g. http://10.0.0.5:8808 (required when enabled). */
      advertiseUrl: z.url({ protocol: /^https?$/, error: "advertiseUrl must be an http:// or https:// URL, e.g. http://10.0.0.5:8808" }).optional(),
      /** Shared by all replicas; proves a forwarded request came from one (use "${EMCEEPEE_CLUSTER_SECRET}"). */
      secret: z.string().min(16, "secret must be at least 16 characters").optional(),
      /** A replica whose heartbeat is older than this is dead: its sessions are adopted. */
      leaseMs: z.number().int().min(500).default(10_000),
    })
    .refine((c) => !c.enabled || (c.advertiseUrl !== undefined && c.secret !== undefined), {
      message: "cluster.enabled needs advertiseUrl (how other replicas reach this one) and secret (shared by all replicas)",
    })
    .prefault({}),
  /** Token buckets on tool calls, each a call must take a token from (docs/adr/0023-rate-limits.md); empty: no limits. */
  rateLimits: z.array(rateLimitSchema).max(200).default([]),
  /** Who sees and may call which tools (docs/adr/0022-decision-pipeline.md); profile "off" (the default): no governance. */
  governance: governanceSchema,
  /** run_code's sandbox bounds (docs/adr/0028-code-mode-sandbox.md). */
  codeMode: codeModeSchema,
});

/** The file as written; parseConfig() turns its entries into a GatewayConfig (disabled servers dropped). */
export const configFileSchema = z.strictObject({
  mcpServers: mcpServersSchema.default({}),
  gateway: gatewaySettingsSchema.prefault({}),
});

export type GatewaySettings = z.infer<typeof gatewaySettingsSchema>;

/**
 * How config is parsed: without zod's JIT. zod compiles a parser per object schema at its first parse, which pays for a
 * schema parsed again and again, not for the config's few parses (start, reload): the settings' first parse took ≈ 4× as
 * long compiled as interpreted, before the gateway listens (docs/adr/0045).
 */
export const CONFIG_PARSE = { jitless: true } as const;

/**
 * Every gateway default, read from the schema above (the one place they are
 * written). Code that needs a default without a config in hand (optional
 * options, tool descriptions) reads it here instead of repeating the number.
 */
export const DEFAULT_SETTINGS: DeepReadonly<GatewaySettings> = deepFreeze(gatewaySettingsSchema.parse({}, CONFIG_PARSE));

type DeepReadonly<T> = T extends object ? { readonly [K in keyof T]: DeepReadonly<T[K]> } : T;

function deepFreeze<T>(value: T): DeepReadonly<T> {
  if (value && typeof value === "object") for (const v of Object.values(value)) deepFreeze(v);
  return Object.freeze(value) as DeepReadonly<T>;
}
export interface GatewayConfig {
  /** The servers to run: entries with `disabled: true` are not here. */
  mcpServers: Record<string, ServerConfig>;
  gateway: GatewaySettings;
}

/** How `config`'s server is shared: its own `sharing` key, else the gateway's default for its transport (docs/adr/0010). */
export function sharingOf(config: ServerConfig, settings: GatewaySettings): SharingMode {
  return config.sharing ?? ("command" in config ? settings.upstream.sharing.stdio : settings.upstream.sharing.remote);
}
