/**
 * The signing keys of each accepted issuer: its metadata is discovered
 * (OpenID Connect Discovery, then RFC 8414), its `issuer` must echo the
 * configured one, and its `jwks_uri` becomes jose's remote key set (cached;
 * an unknown `kid` refetches it, at most once per cooldown). The metadata is
 * read again when the key set is that old (`maxAgeMs`) or on an unknown `kid`
 * after the cooldown, so a moved `jwks_uri` needs no restart; a failed reread
 * keeps the last good one. A failed first discovery is retried after a short
 * pause, not on every request.
 */
import { createRemoteJWKSet, customFetch, errors, type JWTVerifyGetKey } from "jose";
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

/** An issuer's key set as last discovered. */
interface Discovered {
  jwksUri: string;
  set: JWTVerifyGetKey;
  /** Clock ms of the last metadata read (good or failed). */
  readAt: number;
  /** The reread under way, shared by concurrent requests. */
  rereading?: Promise<void> | undefined;
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
    const found = await this.readMetadata(issuer);
    if (typeof found !== "string") {
      const reason = `the authorization server ${issuer} could not be discovered (${found.problems.join("; ")})`;
      this.failed.set(issuer, { until: this.o.clock.now() + (this.o.retryAfterMs ?? 5_000), reason });
      return new IssuerUnavailable(reason);
    }
    const d: Discovered = { jwksUri: found, set: this.remoteSet(found), readAt: this.o.clock.now() };
    const set: JWTVerifyGetKey = async (header, token) => {
      if (this.o.clock.now() - d.readAt >= (this.o.maxAgeMs ?? 600_000)) await this.reread(issuer, d);
      try {
        return await d.set(header, token);
      } catch (err) {
        if (!(err instanceof errors.JWKSNoMatchingKey) || this.o.clock.now() - d.readAt < (this.o.cooldownMs ?? 30_000)) throw err;
        const before = d.jwksUri;
        await this.reread(issuer, d);
        if (d.jwksUri === before) throw err;
        return await d.set(header, token);
      }
    };
    this.sets.set(issuer, set);
    this.failed.delete(issuer);
    return set;
  }

  /** Reads the metadata again; a new `jwks_uri` gets a new key set, a failure keeps the old one. */
  private reread(issuer: string, d: Discovered): Promise<void> {
    d.rereading ??= (async () => {
      const found = await this.readMetadata(issuer);
      d.readAt = this.o.clock.now();
      if (typeof found === "string" && found !== d.jwksUri) {
        d.jwksUri = found;
        d.set = this.remoteSet(found);
      }
    })().finally(() => (d.rereading = undefined));
    return d.rereading;
  }

  private remoteSet(jwksUri: string): JWTVerifyGetKey {
    return createRemoteJWKSet(new URL(jwksUri), {
      timeoutDuration: this.o.timeoutMs ?? 10_000,
      cooldownDuration: this.o.cooldownMs ?? 30_000,
      cacheMaxAge: this.o.maxAgeMs ?? 600_000,
      ...(this.o.fetch ? { [customFetch]: this.o.fetch } : {}),
    });
  }

  /** The issuer's `jwks_uri` from its metadata (the first URL that gives a good one), or what went wrong with each. */
  private async readMetadata(issuer: string): Promise<string | { problems: string[] }> {
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
        if (typeof meta.jwks_uri !== "string" || !URL.canParse(meta.jwks_uri)) {
          problems.push(`${url}: no jwks_uri (a URL)`);
          continue;
        }
        return meta.jwks_uri;
      } catch (err) {
        problems.push(`${url}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    return { problems };
  }
}

/** OpenID Connect Discovery 1.0 §4, then RFC 8414 §3 (well-known inserted before the issuer's path). */
export function metadataUrls(issuer: string): string[] {
  const u = new URL(issuer);
  const path = u.pathname.replace(/\/+$/, "");
  return [`${u.origin}${path}/.well-known/openid-configuration`, `${u.origin}/.well-known/oauth-authorization-server${path}`];
}
