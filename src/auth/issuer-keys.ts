/**
 * The signing keys of each accepted issuer: its metadata is discovered once
 * (OpenID Connect Discovery, then RFC 8414), its `issuer` must echo the
 * configured one, and its `jwks_uri` becomes jose's remote key set (cached;
 * an unknown `kid` refetches it, at most once per cooldown). A failed
 * discovery is retried after a short pause, not on every request.
 */
import { createRemoteJWKSet, customFetch, type JWTVerifyGetKey } from "jose";
import type { Clock } from "../clock.js";

export interface IssuerKeysOptions {
  clock: Clock;
  fetch?: typeof fetch | undefined;
  /** Bound on each metadata or key-set request. @default 10000 */
  timeoutMs?: number | undefined;
  /** No refetch of a key set within this long of the last one (an unknown kid right after a fetch fails). @default 30000 */
  cooldownMs?: number | undefined;
  /** A key set is refetched when this old, used or not. @default 600000 */
  maxAgeMs?: number | undefined;
  /** After a failed discovery, requests fail fast this long before it is tried again. @default 5000 */
  retryAfterMs?: number | undefined;
}

export class IssuerUnavailable {
  constructor(readonly reason: string) {}
}

export class IssuerKeys {
  private readonly sets = new Map<string, JWTVerifyGetKey>();
  private readonly pending = new Map<string, Promise<JWTVerifyGetKey | IssuerUnavailable>>();
  private readonly failed = new Map<string, { until: number; reason: string }>();

  constructor(private readonly o: IssuerKeysOptions) {}

  /** The key set of `issuer` (a configured one), or why it cannot be had now. */
  async keysOf(issuer: string): Promise<JWTVerifyGetKey | IssuerUnavailable> {
    const known = this.sets.get(issuer);
    if (known) return known;
    const failed = this.failed.get(issuer);
    if (failed && failed.until > this.o.clock.now()) return new IssuerUnavailable(failed.reason);
    let p = this.pending.get(issuer);
    if (!p) {
      p = this.discover(issuer).finally(() => this.pending.delete(issuer));
      this.pending.set(issuer, p);
    }
    return p;
  }

  private async discover(issuer: string): Promise<JWTVerifyGetKey | IssuerUnavailable> {
    const problems: string[] = [];
    for (const url of metadataUrls(issuer)) {
      try {
        const res = await (this.o.fetch ?? fetch)(url, { headers: { accept: "application/json" }, signal: AbortSignal.timeout(this.o.timeoutMs ?? 10_000) });
        if (!res.ok) {
          problems.push(`${url}: HTTP ${res.status}`);
          continue;
        }
        const meta = (await res.json()) as { issuer?: unknown; jwks_uri?: unknown };
        if (meta.issuer !== issuer) {
          problems.push(`${url}: its issuer is ${JSON.stringify(meta.issuer)}, not ${issuer}`);
          continue;
        }
        if (typeof meta.jwks_uri !== "string") {
          problems.push(`${url}: no jwks_uri`);
          continue;
        }
        const set = createRemoteJWKSet(new URL(meta.jwks_uri), {
          timeoutDuration: this.o.timeoutMs ?? 10_000,
          cooldownDuration: this.o.cooldownMs ?? 30_000,
          cacheMaxAge: this.o.maxAgeMs ?? 600_000,
          ...(this.o.fetch ? { [customFetch]: this.o.fetch } : {}),
        });
        this.sets.set(issuer, set);
        this.failed.delete(issuer);
        return set;
      } catch (err) {
        problems.push(`${url}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    const reason = `the authorization server ${issuer} could not be discovered (${problems.join("; ")})`;
    this.failed.set(issuer, { until: this.o.clock.now() + (this.o.retryAfterMs ?? 5_000), reason });
    return new IssuerUnavailable(reason);
  }
}

/** OpenID Connect Discovery 1.0 §4, then RFC 8414 §3 (well-known inserted before the issuer's path). */
export function metadataUrls(issuer: string): string[] {
  const u = new URL(issuer);
  const path = u.pathname.replace(/\/+$/, "");
  return [`${u.origin}${path}/.well-known/openid-configuration`, `${u.origin}/.well-known/oauth-authorization-server${path}`];
}
