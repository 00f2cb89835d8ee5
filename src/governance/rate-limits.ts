/**
 * Rate limits on tool calls (gateway.rateLimits, docs/adr/0023-rate-limits.md):
 * each limit matching a call names one token bucket (by its scope: everyone,
 * the principal, the server, the tool, or pairs); the call proceeds only when
 * every such bucket gives a token, taken all or nothing in the store so
 * replicas share the buckets. A refusal is EMCP_RATE_LIMITED, before anything
 * is sent upstream.
 */
import type { Principal } from "../auth/principal.js";
import type { Clock } from "../clock.js";
import type { RateLimitScope, RateLimitSettings } from "../config/rate-limits.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import type { Logger } from "../logging.js";
import type { RateBucketSpec, Store } from "../store/contracts.js";
import { globMatch, principalMatches } from "./match.js";

export interface RateLimiterDeps {
  clock: Clock;
  logger: Logger;
  /** The open store (its buckets are shared by every replica using it). */
  store: () => Store;
}

/** A tool call as the limiter sees it. */
export interface LimitedCall {
  principal: Principal | undefined;
  server: string;
  tool: string;
}

interface Limit {
  name: string;
  scope: RateLimitScope;
  settings: RateLimitSettings;
  refillPerSecond: number;
}

/** The bucket key's part for a caller without a principal (no authentication). */
const NO_PRINCIPAL = "-";

export class RateLimiter {
  private limits: readonly Limit[];
  /** Told of each refusal, by the refusing limit's scope (the metrics counter). */
  onLimited: ((scope: RateLimitScope) => void) | undefined;

  constructor(
    settings: readonly RateLimitSettings[],
    private readonly deps: RateLimiterDeps,
  ) {
    this.limits = toLimits(settings);
  }

  /**
   * Applies re-read limits (SIGHUP; they were validated by the config schema).
   * A bucket whose limit keeps its name and scope keeps its tokens in the store;
   * a changed capacity or refill applies from its next take.
   */
  reload(settings: readonly RateLimitSettings[]): void {
    this.limits = toLimits(settings);
  }

  /** The buckets a call must take from, one per matching limit. */
  bucketsOf(call: LimitedCall): { limit: Limit; spec: RateBucketSpec }[] {
    return this.limits
      .filter(
        (l) => globMatch(l.settings.server, call.server) && globMatch(l.settings.tool, call.tool) && principalMatches(l.settings.principal, call.principal),
      )
      .map((limit) => ({ limit, spec: { key: bucketKey(limit, call), capacity: limit.settings.capacity, refillPerSecond: limit.refillPerSecond } }));
  }

  /** Takes a token from every bucket of the call, or throws EMCP_RATE_LIMITED naming the limit and when to retry. */
  async take(call: LimitedCall): Promise<void> {
    const buckets = this.bucketsOf(call);
    if (buckets.length === 0) return;
    const result = await this.deps.store().rateLimits.take(
      buckets.map((b) => b.spec),
      this.deps.clock.now(),
    );
    if (result.ok) return;
    const { limit } = buckets[result.refused ?? 0]!;
    const retryAfterMs = result.retryAfterMs;
    const retryAfterSeconds = Math.ceil(retryAfterMs / 1000);
    this.onLimited?.(limit.scope);
    this.deps.logger.info(
      { principalHash: call.principal?.hash, limit: limit.name, scope: limit.scope, server: call.server, tool: call.tool, retryAfterMs },
      "rate_limited",
    );
    throw new GatewayError(
      ErrorCodes.RATE_LIMITED,
      `calling '${call.tool}' on '${call.server}' is over the rate limit '${limit.name}' (${describe(limit)}); retry after ${retryAfterSeconds} s (retry_after_ms: ${retryAfterMs})`,
      { details: { retryAfterSeconds, retry_after_ms: retryAfterMs, limit: limit.name, scope: limit.scope } },
    );
  }
}

function toLimits(settings: readonly RateLimitSettings[]): Limit[] {
  return settings.map((s, i) => ({
    name: s.name ?? `rateLimits[${i}]`,
    scope: s.scope,
    settings: s,
    refillPerSecond: s.refillPerSecond ?? s.refillPerMinute! / 60,
  }));
}

/** The bucket of `call` under `limit`: the limit's name, then the parts of the call its scope counts by. */
function bucketKey(limit: Limit, call: LimitedCall): string {
  const who = call.principal?.hash ?? NO_PRINCIPAL;
  const parts: Record<RateLimitScope, string[]> = {
    global: [],
    principal: [who],
    server: [call.server],
    tool: [call.server, call.tool],
    "principal+server": [who, call.server],
    "principal+tool": [who, call.server, call.tool],
  };
  return JSON.stringify([limit.name, limit.scope, ...parts[limit.scope]]);
}

function describe(limit: Limit): string {
  const per = limit.scope === "global" ? "for all callers" : `per ${limit.scope.replace("+", " and ")}`;
  const rate = limit.settings.refillPerMinute !== undefined ? `${limit.settings.refillPerMinute} a minute` : `${limit.refillPerSecond} a second`;
  return `${limit.settings.capacity} calls at once, ${rate}, ${per}`;
}
