/**
 * Bridge 1's envelope for an upstream's `requestState` (MCP 2026-07-28 MRTR):
 * what the gateway hands a modern client in its place, AES-256-GCM sealed
 * under a key derived from a gateway secret, bound to the upstream, the
 * principal, the method and a digest of the request's params, with an
 * expiry. open() refuses a state that was changed, is past its expiry or is
 * presented for another upstream, principal, method or params (so it cannot
 * be replayed into another call); any replica with the same secret opens it.
 * Two kinds, told apart by a prefix the cipher authenticates: an upstream's
 * own state (bridge 1) and a handle of a request parked in this gateway
 * (bridge 3). openOnce() also marks the state used in the store until its
 * expiry, so a replay is refused on every replica that shares it. See
 * docs/design/protocol-eras-upstream.md.
 */
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from "node:crypto";
import { systemClock, type Clock } from "../../clock.js";
import { ErrorCodes, GatewayError } from "../../errors.js";
import type { SingleUseStore } from "../../store/contracts.js";

/** What a sealed state stands for: the upstream's requestState, or a gateway handle of a parked request. */
export type SealedKind = "upstream" | "parked";
const PREFIXES: Record<SealedKind, string> = { upstream: "emcp1.", parked: "emcp1p." };
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** What a sealed state is bound to. */
export interface StateBinding {
  upstream: string;
  /** The caller's principal id (undefined: no authentication). */
  principal: string | undefined;
  method: string;
  /** The request's params (their `_meta`, `inputResponses` and `requestState` are not part of the digest). */
  params: Record<string, unknown>;
}

export interface SealerOptions {
  /** How long a sealed state may be presented. @default 600000 (10 min) */
  ttlMs?: number | undefined;
  clock?: Clock | undefined;
  /** Where openOnce() marks a state used (the gateway's store: shared by the replicas). */
  used?: SingleUseStore | undefined;
}

interface Sealed {
  u: string;
  p: string | null;
  m: string;
  d: string;
  exp: number;
  s: string | null;
}

export class RequestStateSealer {
  private readonly key: Buffer;
  private readonly ttlMs: number;
  private readonly clock: Clock;
  private readonly used: SingleUseStore | undefined;

  /** `secret`: a gateway secret every replica shares (e.g. the vault or cluster key); a purpose-bound key is derived from it. */
  constructor(secret: Uint8Array, options: SealerOptions = {}) {
    this.key = Buffer.from(hkdfSync("sha256", secret, Buffer.alloc(0), "emceepee mrtr requestState v1", 32));
    this.ttlMs = options.ttlMs ?? 600_000;
    this.clock = options.clock ?? systemClock;
    this.used = options.used;
  }

  /** The gateway's requestState standing for the upstream's `state` (undefined: the upstream sent none). */
  seal(binding: StateBinding, state: string | undefined, kind: SealedKind = "upstream"): string {
    const body: Sealed = { ...bound(binding), exp: this.clock.now() + this.ttlMs, s: state ?? null };
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.key, iv);
    cipher.setAAD(Buffer.from(PREFIXES[kind]));
    const data = Buffer.concat([cipher.update(JSON.stringify(body), "utf8"), cipher.final()]);
    return PREFIXES[kind] + Buffer.concat([iv, data, cipher.getAuthTag()]).toString("base64url");
  }

  /** Which kind a client's requestState claims to be (undefined: not one of ours); open() verifies the claim. */
  static kindOf(sealed: string): SealedKind | undefined {
    return (Object.keys(PREFIXES) as SealedKind[]).find((k) => sealed.startsWith(PREFIXES[k]));
  }

  /**
   * The sealed state back from a client's retry (undefined: none was sealed);
   * throws EMCP_BAD_REQUEST_STATE when refused.
   */
  open(sealed: string, binding: StateBinding): string | undefined {
    return this.verify(sealed, binding).body.s ?? undefined;
  }

  /**
   * open(), once: the state is marked used in the store until its expiry, and
   * a state marked before (on any replica sharing the store) is refused as a
   * replay. Throws EMCP_INTERNAL without a store to mark it in.
   */
  async openOnce(sealed: string, binding: StateBinding): Promise<string | undefined> {
    const { body, iv } = this.verify(sealed, binding);
    if (!this.used) throw new GatewayError(ErrorCodes.INTERNAL, "a single-use requestState was opened by a sealer without a store to mark it used in");
    if (!(await this.used.use(`mrtr:${iv}`, body.exp, this.clock.now()))) {
      throw refused("it was used already (a replay); retry the call without requestState to start again");
    }
    return body.s ?? undefined;
  }

  private verify(sealed: string, binding: StateBinding): { body: Sealed; iv: string } {
    const { body, iv } = this.decrypt(sealed);
    const want = bound(binding);
    if (body.u !== want.u || body.p !== want.p || body.m !== want.m || body.d !== want.d) {
      throw refused("it was issued for another call (upstream, principal, method or arguments differ); retry the call without requestState");
    }
    if (this.clock.now() > body.exp) throw refused("it has expired; retry the call without requestState to start again");
    return { body, iv };
  }

  private decrypt(sealed: string): { body: Sealed; iv: string } {
    const kind = RequestStateSealer.kindOf(sealed);
    if (kind === undefined) throw refused("it was not issued by this gateway");
    const raw = Buffer.from(sealed.slice(PREFIXES[kind].length), "base64url");
    if (raw.length < IV_BYTES + TAG_BYTES + 2) throw refused("it is truncated");
    try {
      const decipher = createDecipheriv("aes-256-gcm", this.key, raw.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(PREFIXES[kind]));
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      const text = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString("utf8");
      return { body: JSON.parse(text) as Sealed, iv: raw.subarray(0, IV_BYTES).toString("base64url") };
    } catch {
      throw refused("it failed integrity verification (changed, or sealed under another key)");
    }
  }
}

function bound(b: StateBinding): Omit<Sealed, "exp" | "s"> {
  const { _meta, inputResponses, requestState, ...params } = b.params;
  void _meta;
  void inputResponses;
  void requestState;
  const d = createHash("sha256")
    .update(JSON.stringify(canonical(params)))
    .digest("base64url");
  return { u: b.upstream, p: b.principal ?? null, m: b.method, d };
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v === null || typeof v !== "object") return v;
  return Object.fromEntries(
    Object.keys(v)
      .sort()
      .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
  );
}

function refused(why: string): GatewayError {
  return new GatewayError(ErrorCodes.BAD_REQUEST_STATE, `Invalid or expired requestState: ${why}`, { details: { reason: "invalid_request_state" } });
}
