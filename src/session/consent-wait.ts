/**
 * Consent that does not lose the call (issue 23, docs/adr/0027 §9): a call
 * that meets EMCP_CONSENT_REQUIRED waits for the person's grant to reach the
 * vault (the console's callback stores it, on any replica: the wait reads the
 * store) and then runs again. The transparent faces ask the client with a
 * URL-mode elicitation (2025-11-25) and send notifications/elicitation/complete
 * when the grant is stored; a client without URL elicitation gets the
 * URLElicitationRequiredError (-32042) carrying the URL. The meta face
 * promotes the call to a task that waits (meta/tools/tools.ts).
 */
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { ElicitResultSchema } from "@modelcontextprotocol/sdk/types.js";
import type {
  CallToolResult,
  ClientCapabilities,
  ElicitRequestURLParams,
  ElicitResult,
  ServerNotification,
  ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import type { Clock } from "../clock.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import type { CredentialRecord, CredentialStore } from "../store/contracts.js";
import type { RunOptions } from "../tasks/execute.js";
import { ANONYMOUS } from "../upstream/auth/connect.js";
import { Withdrawn, type PendingRequests } from "./pending-requests.js";

/** JSON-RPC code of URLElicitationRequiredError (MCP 2025-11-25). */
export const URL_ELICITATION_REQUIRED = -32042;

/** How often a waiting call reads the store for the grant. */
export const GRANT_POLL_MS = 500;

/** What a CONSENT_REQUIRED failure asks of the person. */
export interface ConsentNeeded {
  server: string;
  url: string;
  error: GatewayError;
  /** The credential slot whose value is awaited: "oauth" (a grant), or `secret:<name>` (a per-user secret, upstream/auth/secrets.ts). */
  slot: string;
}

type Owner = { issuer: string; subject: string };

/** The consent `err` asks for, when it is EMCP_CONSENT_REQUIRED with an authorization URL. */
export function consentNeeded(err: unknown): ConsentNeeded | undefined {
  if (!(err instanceof GatewayError) || err.code !== ErrorCodes.CONSENT_REQUIRED) return undefined;
  const url = err.details?.["authorizationUrl"];
  const server = err.details?.["server"];
  if (typeof url !== "string" || typeof server !== "string") return undefined;
  const slot = err.details?.["slot"];
  return { server, url, error: err, slot: typeof slot === "string" ? slot : "oauth" };
}

/** Whose grant a session's connections use (the anonymous identity without authentication, as connect.ts). */
export function grantOwner(principal: Owner | undefined): Owner {
  return principal ? { issuer: principal.issuer, subject: principal.subject } : ANONYMOUS;
}

/** The URL-mode elicitation params for a consent. */
export function consentElicitation(consent: ConsentNeeded, elicitationId: string): ElicitRequestURLParams {
  return {
    mode: "url",
    elicitationId,
    url: consent.url,
    message: consent.slot.startsWith("secret:")
      ? `Server ${consent.server} needs your own value for ${JSON.stringify(consent.slot.slice(7))}. Open the link (the gateway's console), sign in and save it; the call goes on by itself once you have.`
      : `Server ${consent.server} needs your authorization. Open the link as yourself and sign in; the call goes on by itself once you have.`,
  };
}

/** The URLElicitationRequiredError (-32042) for a request that cannot wait: the elicitation in `data.elicitations`, the EMCP code and URL kept. */
export function urlElicitationRequired(consent: ConsentNeeded, elicitationId: string): GatewayError {
  return new GatewayError(ErrorCodes.CONSENT_REQUIRED, `${consent.error.message} (URL elicitation ${elicitationId})`, {
    details: { ...consent.error.details, elicitations: [consentElicitation(consent, elicitationId)] },
    rpcCode: URL_ELICITATION_REQUIRED,
  });
}

export interface GrantWaitOptions {
  credentials: () => CredentialStore;
  owner: Owner;
  upstream: string;
  /** The credential slot awaited. @default "oauth" */
  slot?: string | undefined;
  clock: Clock;
  /** Give up after this long (the authorization flow's own lifetime, vault.flowTtlMs). */
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  pollMs?: number | undefined;
}

/**
 * Resolves once the owner's grant for the upstream is stored anew (a record
 * other than `before`, the one read when consent was asked for: none, or one
 * that no longer works). Rejects with CANCELLED on `signal`, and with
 * CONSENT_REQUIRED after `timeoutMs`. Leaves no timer behind.
 */
export async function waitForGrant(o: GrantWaitOptions, before: CredentialRecord | undefined): Promise<void> {
  const key = { ...o.owner, upstream: o.upstream, slot: o.slot ?? "oauth" };
  const deadline = o.clock.now() + o.timeoutMs;
  const pollMs = o.pollMs ?? GRANT_POLL_MS;
  for (;;) {
    if (o.signal?.aborted) throw new GatewayError(ErrorCodes.CANCELLED, `the call waiting for consent to server ${o.upstream} was cancelled`);
    const now = await o.credentials().get(key);
    if (now && (!before || now.sealed !== before.sealed)) return;
    if (o.clock.now() >= deadline) {
      throw new GatewayError(
        ErrorCodes.CONSENT_REQUIRED,
        `no ${o.slot?.startsWith("secret:") ? `value for ${JSON.stringify(o.slot.slice(7))}` : "authorization"} for server ${o.upstream} arrived within ${o.timeoutMs} ms; open the Connections page of the gateway's console (/console/connections) and ${o.slot?.startsWith("secret:") ? "save it" : "connect"}, then call again`,
        { details: { server: o.upstream } },
      );
    }
    await pause(o.clock, Math.min(pollMs, Math.max(1, deadline - o.clock.now())), o.signal);
  }
}

/** The grant as it is now (what waitForGrant compares with). */
export function currentGrant(o: Pick<GrantWaitOptions, "credentials" | "owner" | "upstream" | "slot">): Promise<CredentialRecord | undefined> {
  return o.credentials().get({ ...o.owner, upstream: o.upstream, slot: o.slot ?? "oauth" });
}

function pause(clock: Clock, ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clock.clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = clock.setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

export interface ConsentClient {
  /** The client declared `elicitation.url`. */
  supportsUrl: boolean;
  /** Sends elicitation/create (URL mode) on the waiting request's stream. */
  elicit(params: ElicitRequestURLParams): Promise<ElicitResult>;
  /** Sends notifications/elicitation/complete. */
  complete(elicitationId: string): Promise<void>;
}

/**
 * Runs `attempt`; when it needs consent, asks the client (a URL elicitation,
 * or -32042 when it cannot take one), waits for the grant and runs `attempt`
 * again (at most twice: a second CONSENT_REQUIRED after a fresh grant is
 * passed on).
 */
export async function withConsent<T>(
  o: Omit<GrantWaitOptions, "upstream"> & { client: ConsentClient; newId: () => string },
  attempt: () => Promise<T>,
): Promise<T> {
  for (let round = 0; ; round++) {
    try {
      return await attempt();
    } catch (err) {
      const consent = consentNeeded(err);
      if (!consent || round >= 2) throw err;
      const elicitationId = o.newId();
      if (!o.client.supportsUrl) throw urlElicitationRequired(consent, elicitationId);
      const wait = { ...o, upstream: consent.server, slot: consent.slot };
      const before = await currentGrant(wait);
      const answer = await o.client.elicit(consentElicitation(consent, elicitationId));
      if (answer.action !== "accept") {
        throw new GatewayError(
          ErrorCodes.CONSENT_REQUIRED,
          `the authorization for server ${consent.server} was not given (${answer.action}); call again to be asked again`,
          {
            details: { server: consent.server },
          },
        );
      }
      await waitForGrant(wait, before);
      await o.client.complete(elicitationId);
    }
  }
}

/** What a face's request handler has: the SDK's extra (its stream to the client), the client's capabilities. */
export interface ConsentRequest {
  gateway: { store: { credentials: CredentialStore }; clock: Clock; newId: () => string; settings: { vault: { flowTtlMs: number } } };
  principal: Owner | undefined;
  clientCapabilities: ClientCapabilities | undefined;
  extra: Pick<RequestHandlerExtra<ServerRequest, ServerNotification>, "sendRequest" | "sendNotification" | "signal">;
}

/** withConsent's options for one downstream request of a transparent face. */
export function consentOptions(r: ConsentRequest): Parameters<typeof withConsent>[0] {
  return {
    credentials: () => r.gateway.store.credentials,
    owner: grantOwner(r.principal),
    clock: r.gateway.clock,
    timeoutMs: r.gateway.settings.vault.flowTtlMs,
    signal: r.extra.signal,
    newId: r.gateway.newId,
    client: {
      supportsUrl: r.clientCapabilities?.elicitation?.url !== undefined,
      // No timeout of the SDK's own: the person takes their time; the request's cancel still ends it.
      elicit: (params) =>
        r.extra.sendRequest({ method: "elicitation/create", params }, ElicitResultSchema, {
          signal: r.extra.signal,
          timeout: r.gateway.settings.vault.flowTtlMs,
        }),
      complete: (elicitationId) => r.extra.sendNotification({ method: "notifications/elicitation/complete", params: { elicitationId } }),
    },
  };
}

/**
 * The meta face's promoted call that needs consent (issue 23): a URL
 * elicitation waits in the session's pending queue (get_elicitations,
 * await_activity; the task reads input_required meanwhile) until the grant is
 * stored, then `then` runs the call. Declining it (respond_to_elicitation
 * decline/cancel) fails the task; accepting only says the person went to the
 * link, the wait goes on until the grant arrives. Cancelling the task ends the wait.
 */
export function runAfterConsent(c: {
  wait: Omit<GrantWaitOptions, "signal">;
  consent: ConsentNeeded;
  pending: Pick<PendingRequests, "add">;
  newId: () => string;
  then: (o: RunOptions) => Promise<CallToolResult>;
}): (o: RunOptions) => Promise<CallToolResult> {
  const wait = { ...c.wait, slot: c.consent.slot };
  return async (o) => {
    const before = await currentGrant(wait);
    const stop = new AbortController();
    const onAbort = () => stop.abort("cancelled");
    o.signal.addEventListener("abort", onAbort, { once: true });
    const waiting = o.origin.awaitClient();
    let declined: GatewayError | undefined;
    const asked = c.pending.add("elicitation", c.consent.server, consentElicitation(c.consent, c.newId()), stop.signal);
    void asked.then(
      (r) => {
        if (r.action === "accept") return;
        declined = new GatewayError(
          ErrorCodes.CONSENT_REQUIRED,
          `the authorization for server ${c.consent.server} was not given (${r.action}); call again to be asked again`,
          {
            details: { server: c.consent.server },
          },
        );
        stop.abort("declined");
      },
      () => undefined,
    );
    try {
      await waitForGrant({ ...wait, signal: stop.signal }, before);
    } catch (err) {
      throw declined ?? err;
    } finally {
      waiting();
      o.signal.removeEventListener("abort", onAbort);
      // The grant is stored: the elicitation is done (withdrawn from the queue if nobody answered it).
      stop.abort(new Withdrawn("the authorization was given"));
    }
    return c.then(o);
  };
}
