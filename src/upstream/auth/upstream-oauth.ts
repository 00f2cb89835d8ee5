/**
 * The OAuth client for remote upstreams (issue 23, docs/adr/0027-upstream-identity.md): per
 * (principal, upstream), an access token from the vault, refreshed ahead of
 * expiry and on a 401, or else an authorization to start (CONSENT_REQUIRED
 * carrying its URL); and the callback's completion from the flow store, so it
 * works on any replica; a refresh runs on one replica at a time (a store
 * lease), the others wait for its grant. The protocol is the SDK's `auth()` (discovery,
 * registration, PKCE S256, RFC 8707 resource, code exchange, refresh); the
 * checks it leaves out are in provider.ts and complete().
 */
import { randomBytes } from "node:crypto";
import { auth, extractWWWAuthenticateParams } from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthDiscoveryState } from "@modelcontextprotocol/sdk/client/auth.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Clock, TimerHandle } from "../../clock.js";
import { ErrorCodes, GatewayError, errorMessage } from "../../errors.js";
import type { LeaseStore, OAuthFlowStore } from "../../store/contracts.js";
import { GatewayOAuthProvider, authFailed, flowAad, type ProviderContext, type StoredTokens, type UpstreamOAuthConfig } from "./provider.js";
import type { CredentialVault } from "./vault.js";

export interface UpstreamOAuthOptions {
  vault: CredentialVault;
  flows: OAuthFlowStore;
  clock: Clock;
  /** `<public base>/oauth/callback`. */
  redirectUrl: string;
  /** @default 600_000 */
  flowTtlMs?: number;
  /** @default 10_000 */
  maxPendingFlows?: number;
  /** @default 60_000 */
  refreshAheadMs?: number;
  /** The gateway's Client ID Metadata Document URL (https), offered where the authorization server supports SEP-991. */
  clientMetadataUrl?: string | undefined;
  /** Step-ups (new consent for more scopes on `insufficient_scope`) in a row for one (principal, upstream) before the call fails instead. @default 2 */
  maxStepUps?: number;
  /** For discovery, registration and token requests. @default globalThis.fetch */
  fetch?: FetchLike;
  /** Replicas' shared leases: one refresh of a grant at a time across them (absent: one at a time in this process only). */
  leases?: LeaseStore | undefined;
  /** How long a refresh lease lasts unrenewed: the holder renews it every third of this while it refreshes; a holder that died lets it lapse. @default 30_000 */
  refreshLeaseMs?: number;
  /** How long one renewal's requests (discovery, registration, token) may take in all before they are aborted and the call fails. @default 60_000 */
  refreshTimeoutMs?: number;
}
/** How often a replica waiting for another's refresh reads the store. */
const REFRESH_POLL_MS = 200;

/** What an upstream's 401 or 403 asked for (WWW-Authenticate, RFC 6750 / RFC 9728): where its resource metadata is, which scope. */
export interface AuthChallenge {
  resourceMetadataUrl?: URL | undefined;
  scope?: string | undefined;
}

/** Whose and which: the principal (issuer, subject) and the upstream's name, URL and `auth` config. */
export interface UpstreamAuthTarget {
  owner: { issuer: string; subject: string };
  upstream: string;
  url: string;
  config: UpstreamOAuthConfig;
}

export class UpstreamOAuth {
  private readonly ctx: ProviderContext;
  private readonly refreshAheadMs: number;
  private readonly fetchFn: FetchLike;
  private readonly inflight = new Map<string, Promise<unknown>>();
  private readonly maxStepUps: number;
  /** Step-ups in a row per (principal, upstream) (this process's) and the scopes the last asked for: reset once the grant holds them. */
  private readonly stepUps = new Map<string, { count: number; wanted: string[] }>();
  private readonly leases: LeaseStore | undefined;
  /** This replica as a lease holder. */
  private readonly holder = randomBytes(12).toString("base64url");
  private readonly leaseMs: number;
  private readonly renewalTimeoutMs: number;

  constructor(options: UpstreamOAuthOptions) {
    this.ctx = {
      vault: options.vault,
      flows: options.flows,
      clock: options.clock,
      redirectUrl: options.redirectUrl,
      clientMetadataUrl: options.clientMetadataUrl,
      flowTtlMs: options.flowTtlMs ?? 600_000,
      maxPendingFlows: options.maxPendingFlows ?? 10_000,
      discovery: new Map<string, OAuthDiscoveryState>(),
    };
    this.refreshAheadMs = options.refreshAheadMs ?? 60_000;
    this.maxStepUps = options.maxStepUps ?? 2;
    this.fetchFn = options.fetch ?? ((url, init) => fetch(url, init));
    this.leases = options.leases;
    this.leaseMs = options.refreshLeaseMs ?? 30_000;
    this.renewalTimeoutMs = options.refreshTimeoutMs ?? 60_000;
  }

  private provider(t: UpstreamAuthTarget, flow?: { verifier: string; redirectUri: string }, stepUp = false): GatewayOAuthProvider {
    return new GatewayOAuthProvider(this.ctx, t.owner, t.upstream, t.config, flow, stepUp);
  }

  /**
   * The principal's access token for the upstream: the stored one while it
   * is not within refreshAheadMs of expiring (or `force`), else refreshed;
   * without one (or when the refresh is refused) CONSENT_REQUIRED with the
   * authorization URL to open. `challenge`: what the upstream's 401 named,
   * used by a new authorization (its metadata URL, and its scope, with the
   * configured ones, ahead of the resource's scopes_supported: SEP-835).
   */
  async accessToken(t: UpstreamAuthTarget, options: { force?: boolean; challenge?: AuthChallenge } = {}): Promise<string> {
    const tokens = await this.provider(t).tokens();
    const now = this.ctx.clock.now();
    if (tokens && !options.force && (tokens.expires_at === undefined || tokens.expires_at - this.refreshAheadMs > now)) return tokens.access_token;
    // One refresh or authorization start per (principal, upstream) at a time: concurrent calls share it.
    const key = JSON.stringify([t.owner.issuer, t.owner.subject, t.upstream]);
    let pending = this.inflight.get(key);
    if (!pending) {
      pending = this.renew(t, key, tokens, options.challenge ?? {}).finally(() => this.inflight.delete(key));
      this.inflight.set(key, pending);
    }
    await pending;
    const fresh = await this.provider(t).tokens();
    if (!fresh) throw new GatewayError(ErrorCodes.INTERNAL, "an authorization ended without tokens");
    return fresh.access_token;
  }

  /**
   * Renews `seen` (the grant read before, if any) across replicas: the replica that takes the grant's lease refreshes
   * (unless the grant changed meanwhile: then it is used); another waits for the grant it saves and uses that, so two
   * replicas never send one refresh token twice (a server that rotates them refuses the second and revokes the grant).
   * Without a refresh token (or shared leases) it runs here at once. The holder renews its lease while it refreshes
   * (heartbeat), so a slow token endpoint does not let another replica in; only a holder that died (stopped
   * renewing) lets it lapse. Every renewal is bounded by refreshTimeoutMs.
   */
  private async renew(t: UpstreamAuthTarget, key: string, seen: StoredTokens | undefined, challenge: AuthChallenge): Promise<void> {
    const leases = this.leases;
    if (!leases || seen?.refresh_token === undefined)
      return this.bounded(undefined, (signal) => this.run(t, seen?.refresh_token !== undefined, challenge, signal));
    const lease = `oauth-refresh:${key}`;
    const changed = async () => {
      const now = await this.provider(t).tokens();
      return now?.access_token === seen.access_token ? undefined : { now };
    };
    // A live holder ends within refreshTimeoutMs; a dead one's lease lapses within refreshLeaseMs of its last renewal.
    const waitMs = this.renewalTimeoutMs + 2 * this.leaseMs;
    const deadline = this.ctx.clock.now() + waitMs;
    for (;;) {
      if (await leases.acquire(lease, this.holder, this.ctx.clock.now(), this.leaseMs)) {
        return this.bounded({ leases, lease }, async (signal) => {
          const moved = await changed();
          // Another replica renewed it while this one waited: used as it is (or, forgotten there, asked for again).
          if (moved) return moved.now ? undefined : this.run(t, false, challenge, signal);
          return this.run(t, true, challenge, signal);
        });
      }
      const moved = await changed();
      if (moved) return moved.now ? undefined : this.bounded(undefined, (signal) => this.run(t, false, challenge, signal));
      if (this.ctx.clock.now() > deadline) {
        throw authFailed(t.upstream, `another replica's renewal of the grant did not finish within ${Math.round(waitMs / 1000)} s; call again`);
      }
      await new Promise<void>((resolve) => this.ctx.clock.setTimeout(resolve, REFRESH_POLL_MS));
    }
  }

  /**
   * Runs `job` with a signal aborted after refreshTimeoutMs, and with `held` (a lease this replica took) renewed every
   * third of refreshLeaseMs until the job ends, then given back. Every timer is cleared on every outcome.
   */
  private async bounded(held: { leases: LeaseStore; lease: string } | undefined, job: (signal: AbortSignal) => Promise<void>): Promise<void> {
    const clock = this.ctx.clock;
    const abort = new AbortController();
    let ended = false;
    let beat: TimerHandle | undefined;
    const heartbeat = () => {
      if (!held || ended) return;
      beat = clock.setTimeout(
        () => {
          held.leases.renew(held.lease, this.holder, clock.now(), this.leaseMs).then(
            // Not held any more (it lapsed: renewals failed for a whole lease): nothing to renew; the job goes on (ADR 0027 §17, limits).
            (kept) => kept && heartbeat(),
            () => heartbeat(), // the store failed this once: the next beat tries again while the hold lasts
          );
        },
        Math.max(1, Math.floor(this.leaseMs / 3)),
      );
    };
    const timeout = clock.setTimeout(() => abort.abort(new RenewalTimeout(this.renewalTimeoutMs)), this.renewalTimeoutMs);
    heartbeat();
    try {
      await job(abort.signal);
    } finally {
      ended = true;
      clock.clearTimeout(beat);
      clock.clearTimeout(timeout);
      if (held) await held.leases.release(held.lease, this.holder).catch(() => undefined);
    }
  }

  /**
   * Runs the SDK's auth(): a refresh when a refresh token is kept, else (or when it is refused) a new authorization,
   * which ends in CONSENT_REQUIRED. `signal` ends its requests (refreshTimeoutMs): then the call fails and a kept grant stays.
   */
  private async run(t: UpstreamAuthTarget, canRefresh: boolean, challenge: AuthChallenge, signal: AbortSignal): Promise<void> {
    const provider = this.provider(t);
    let result: "AUTHORIZED" | "REDIRECT";
    const scope = challenge.scope ? unionScopes(t.config.scopes ?? [], challenge.scope.split(" ")) : undefined;
    const timedOut = () =>
      signal.reason instanceof RenewalTimeout
        ? authFailed(t.upstream, `its authorization server did not answer within ${signal.reason.ms / 1000} s (nothing stored was changed); call again`)
        : undefined;
    try {
      result = await auth(provider, {
        serverUrl: t.url,
        fetchFn: (url, init) => this.fetchFn(url, { ...init, signal: init?.signal ? AbortSignal.any([init.signal, signal]) : signal }),
        ...(challenge.resourceMetadataUrl ? { resourceMetadataUrl: challenge.resourceMetadataUrl } : {}),
        ...(scope ? { scope } : {}),
      });
    } catch (err) {
      if (err instanceof GatewayError) throw err;
      const late = timedOut();
      if (late) throw late;
      if (!canRefresh) throw authFailed(t.upstream, errorMessage(err), err);
      // The refresh was refused (revoked, expired): forget the grant and ask the person again.
      await provider.invalidateCredentials("tokens");
      return this.run(t, false, challenge, signal);
    }
    if (result === "AUTHORIZED") return;
    // The SDK answers a refresh that failed without a refusal (here: aborted) with a new authorization: not that.
    const late = timedOut();
    if (late) throw late;
    const url = provider.authorizationUrl;
    throw new GatewayError(
      ErrorCodes.CONSENT_REQUIRED,
      `server ${t.upstream} needs your authorization: open ${url?.href ?? "the authorization URL"} in a browser (as yourself), then call again`,
      { details: { server: t.upstream, authorizationUrl: url?.href } },
    );
  }

  /**
   * Completes an authorization from the callback's query: the flow must
   * belong to `person` (checked before it is taken, so another person's
   * callback leaves it for its owner), is then taken (used up whatever
   * follows), and the authorization server's `iss` must match (RFC 9207, as
   * recorded when the flow started) before the code is redeemed. Nothing is
   * stored unless every check passes and the code is redeemed.
   */
  async complete(
    query: URLSearchParams,
    person: { issuer: string; subject: string },
    targetOf: (upstream: string) => UpstreamAuthTarget | undefined,
  ): Promise<{ upstream: string }> {
    const state = query.get("state");
    const now = this.ctx.clock.now();
    const seen = state === null ? undefined : await this.ctx.flows.peek(state, now);
    if (seen && (seen.issuer !== person.issuer || seen.subject !== person.subject)) {
      throw callbackRefused("this authorization was started for another person; the person it is for must open their own link (it is still waiting for them)");
    }
    const flow = seen && state !== null ? await this.ctx.flows.take(state, now) : undefined;
    if (!flow || state === null) throw callbackRefused("unknown, already used or expired state: start the authorization again");
    const target = targetOf(flow.upstream);
    if (!target) throw callbackRefused(`server ${flow.upstream} is no longer configured for OAuth`);
    const error = query.get("error");
    if (error !== null) {
      const description = query.get("error_description");
      throw callbackRefused(`the authorization server answered ${shown(error, 64)}${description ? `: ${shown(description, 300)}` : ""}`);
    }
    const iss = query.get("iss");
    if ((iss !== null || flow.issRequired === true) && iss !== flow.authIssuer) {
      throw callbackRefused(
        `the response names issuer ${iss === null ? "(none)" : shown(iss, 200)}, not ${flow.authIssuer} where the authorization was started (RFC 9207)`,
      );
    }
    const code = query.get("code");
    if (code === null) throw callbackRefused("the callback carries no code");
    const verifier = this.ctx.vault.vault.open({ keyId: flow.keyId, sealed: flow.verifierSealed }, flowAad(state));
    const provider = this.provider({ ...target, owner: person }, { verifier, redirectUri: flow.redirectUri });
    // The metadata URL the flow was started from (a 401 may name any path): this replica may never have seen it.
    const resourceMetadataUrl =
      flow.resourceMetadataUrl !== undefined && URL.canParse(flow.resourceMetadataUrl) ? new URL(flow.resourceMetadataUrl) : undefined;
    try {
      await auth(provider, { serverUrl: target.url, authorizationCode: code, fetchFn: this.fetchFn, ...(resourceMetadataUrl ? { resourceMetadataUrl } : {}) });
    } catch (err) {
      if (err instanceof GatewayError) throw err;
      throw authFailed(flow.upstream, `the code was not redeemed: ${errorMessage(err)}`, err);
    }
    return { upstream: flow.upstream };
  }

  /** Forgets the principal's grant for the upstream (disconnect); true when there was one. */
  disconnect(t: Pick<UpstreamAuthTarget, "owner" | "upstream">): Promise<boolean> {
    return this.ctx.vault.delete({ ...t.owner, upstream: t.upstream, slot: "oauth" });
  }

  /**
   * A fetch for the upstream's transport that sends the principal's access
   * token, and on a 401 refreshes once and retries; a request that cannot
   * get a token fails with CONSENT_REQUIRED (or UPSTREAM_AUTH_FAILED).
   * Without any grant the request goes first without a token: the
   * upstream's 401 says where its resource metadata is and which scope it
   * wants (the MCP authorization spec's discovery), and then the
   * authorization starts from that.
   */
  fetchFor(t: UpstreamAuthTarget, base: FetchLike): FetchLike {
    return async (url, init) => {
      const send = (token: string) => {
        const headers = new Headers(init?.headers);
        headers.set("authorization", `Bearer ${token}`);
        return base(url, { ...init, headers });
      };
      let res: Response;
      if ((await this.provider(t).tokens()) === undefined) {
        res = await base(url, init);
        if (res.status !== 401) return res;
        const challenge = challengeOf(res);
        await res.body?.cancel();
        res = await send(await this.accessToken(t, { challenge }));
      } else {
        res = await send(await this.accessToken(t));
      }
      if (res.status === 401) {
        const challenge = challengeOf(res);
        await res.body?.cancel();
        // The token was refused: discovery is done again (the resource may name another authorization server now: SEP-2352).
        await this.provider(t).invalidateCredentials("discovery");
        res = await send(await this.accessToken(t, { force: true, challenge }));
      }
      const key = JSON.stringify([t.owner.issuer, t.owner.subject, t.upstream]);
      const challenge = res.status === 403 ? extractWWWAuthenticateParams(res) : undefined;
      if (challenge?.error !== "insufficient_scope") return res;
      await res.body?.cancel();
      return this.stepUp(t, key, (challenge.scope ?? "").split(" ").filter(Boolean), { resourceMetadataUrl: challenge.resourceMetadataUrl });
    };
  }

  /**
   * The upstream answered 403 insufficient_scope naming `required`: a new
   * authorization for the union of what is granted, configured and required
   * (the current grant stays in use until it completes), ending in
   * CONSENT_REQUIRED; UPSTREAM_AUTH_FAILED when the grant already holds those
   * scopes, or after maxStepUps in a row that did not get their scopes
   * (unanswered, or the authorization server granted less).
   */
  private async stepUp(t: UpstreamAuthTarget, key: string, required: string[], challenge: AuthChallenge): Promise<never> {
    const granted = ((await this.provider(t).tokens())?.scope ?? "").split(" ").filter(Boolean);
    const wanted = [...new Set([...granted, ...(t.config.scopes ?? []), ...required])];
    const last = this.stepUps.get(key);
    // The last step-up got what it asked for: this is a new need, not the same one again.
    const count = last && !last.wanted.every((s) => granted.includes(s)) ? last.count : 0;
    if (required.length > 0 && required.every((s) => granted.includes(s))) {
      throw stepUpFailed(t.upstream, `it refuses with insufficient_scope though the grant holds the scopes it names (${required.join(" ")})`);
    }
    if (count >= this.maxStepUps) {
      this.stepUps.delete(key);
      throw stepUpFailed(
        t.upstream,
        `after ${count} new authorizations in a row it still refuses with insufficient_scope (now naming ${required.join(" ") || "no scope"})`,
      );
    }
    this.stepUps.set(key, { count: count + 1, wanted });
    const provider = this.provider(t, undefined, true);
    await provider.prepareStepUp(wanted);
    let result: "AUTHORIZED" | "REDIRECT";
    try {
      result = await auth(provider, {
        serverUrl: t.url,
        scope: wanted.join(" "),
        fetchFn: this.fetchFn,
        ...(challenge.resourceMetadataUrl ? { resourceMetadataUrl: challenge.resourceMetadataUrl } : {}),
      });
    } catch (err) {
      if (err instanceof GatewayError) throw err;
      throw authFailed(t.upstream, errorMessage(err), err);
    }
    const url = provider.authorizationUrl;
    if (result !== "REDIRECT" || !url) throw new GatewayError(ErrorCodes.INTERNAL, "a step-up authorization did not start");
    throw new GatewayError(
      ErrorCodes.CONSENT_REQUIRED,
      `server ${t.upstream} needs more of your authorization (scopes ${wanted.join(" ")}): open ${url.href} in a browser (as yourself), then call again`,
      { details: { server: t.upstream, authorizationUrl: url.href, scopes: wanted } },
    );
  }
}

/** What a 401's or 403's WWW-Authenticate names (none when the header is missing or unparsable). */
function challengeOf(res: Response): AuthChallenge {
  const { resourceMetadataUrl, scope } = extractWWWAuthenticateParams(res);
  return { resourceMetadataUrl, scope };
}

/** Why a renewal's requests were aborted: they took longer than refreshTimeoutMs. */
class RenewalTimeout extends Error {
  constructor(readonly ms: number) {
    super(`the renewal took longer than ${ms} ms`);
  }
}

function unionScopes(...lists: string[][]): string {
  return [...new Set(lists.flat().filter(Boolean))].join(" ");
}

/** Text from the callback's query as it may be logged and shown: control and format characters dropped, at most `max` characters, quoted (JSON escapes). */
export function shown(text: string, max: number): string {
  const clean = text.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, "");
  const chars = [...clean];
  return JSON.stringify(chars.length > max ? `${chars.slice(0, max).join("")}…` : clean);
}

function stepUpFailed(upstream: string, problem: string): GatewayError {
  return new GatewayError(
    ErrorCodes.UPSTREAM_AUTH_FAILED,
    `server ${upstream} refused the call for missing scopes: ${problem}; ask its operator which scopes the tool needs, or add them to the server's auth.scopes`,
    { details: { server: upstream } },
  );
}

function callbackRefused(problem: string): GatewayError {
  return new GatewayError(ErrorCodes.UPSTREAM_AUTH_FAILED, `the authorization callback was refused: ${problem}; nothing was stored`);
}
