/**
 * The vault: upstream credentials sealed with AES-256-GCM (node:crypto)
 * before they reach the store, opened when used (docs/adr/0027-upstream-identity.md). The
 * additional data binds each sealed value to its key in the store (whose,
 * which upstream, which slot), so a value copied to another row does not
 * open. Nothing here logs; errors never carry a secret.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { ErrorCodes, GatewayError } from "../../errors.js";
import type { CredentialKey, CredentialRecord, CredentialStore } from "../../store/contracts.js";
import type { VaultKey } from "./keyring.js";

const NONCE_BYTES = 12;
const TAG_BYTES = 16;

export interface Sealed {
  keyId: string;
  sealed: string;
}

export class Vault {
  private readonly byId: ReadonlyMap<string, Buffer>;

  /** `keys[0]` seals; every key opens what it sealed. */
  constructor(private readonly keys: readonly VaultKey[]) {
    if (keys.length === 0) throw new GatewayError(ErrorCodes.INTERNAL, "a vault needs at least one key");
    this.byId = new Map(keys.map((k) => [k.id, k.key]));
  }

  get currentKeyId(): string {
    return this.keys[0]!.id;
  }

  seal(plaintext: string, aad: string): Sealed {
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.keys[0]!.key, nonce);
    cipher.setAAD(Buffer.from(aad, "utf8"));
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return { keyId: this.currentKeyId, sealed: Buffer.concat([nonce, body, cipher.getAuthTag()]).toString("base64url") };
  }

  open(value: Sealed, aad: string): string {
    const key = this.byId.get(value.keyId);
    if (!key) {
      throw new GatewayError(
        ErrorCodes.VAULT_UNAVAILABLE,
        `a stored credential was sealed with vault key ${value.keyId}, which is not configured; add that key back to gateway.vault.keys (after the current one) or connect again`,
        { details: { keyId: value.keyId } },
      );
    }
    const raw = Buffer.from(value.sealed, "base64url");
    try {
      const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, NONCE_BYTES));
      decipher.setAAD(Buffer.from(aad, "utf8"));
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      return Buffer.concat([decipher.update(raw.subarray(NONCE_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString("utf8");
    } catch {
      throw new GatewayError(
        ErrorCodes.VAULT_UNAVAILABLE,
        `a stored credential does not open with vault key ${value.keyId} (altered, or moved from another record); connect again`,
        { details: { keyId: value.keyId } },
      );
    }
  }
}

/** The additional data of a credential: its store key. */
export function credentialAad(k: CredentialKey): string {
  return JSON.stringify(["cred", k.issuer, k.subject, k.upstream, k.slot]);
}

/** Sealed JSON values per credential key, over a CredentialStore. */
export class CredentialVault {
  constructor(
    readonly vault: Vault,
    private readonly store: CredentialStore,
    private readonly now: () => number,
  ) {}

  async put<T>(key: CredentialKey, value: T, info?: CredentialRecord["info"]): Promise<void> {
    const k = { issuer: key.issuer, subject: key.subject, upstream: key.upstream, slot: key.slot };
    const sealed = this.vault.seal(JSON.stringify(value), credentialAad(k));
    await this.store.put({ ...k, ...sealed, ...(info ? { info } : {}), updatedAt: this.now() });
  }

  async get<T>(key: CredentialKey): Promise<T | undefined> {
    const r = await this.store.get(key);
    return r === undefined ? undefined : (JSON.parse(this.vault.open(r, credentialAad(r))) as T);
  }

  delete(key: CredentialKey): Promise<boolean> {
    return this.store.delete(key);
  }

  /**
   * Re-seals every credential sealed with an older key under the current one
   * (after a rotation: the new key first in gateway.vault.keys, the old ones
   * after it). Returns how many; afterwards the old keys may be removed.
   */
  async reseal(batch = 100): Promise<number> {
    let n = 0;
    for (;;) {
      const stale = await this.store.listNotSealedWith(this.vault.currentKeyId, batch);
      if (stale.length === 0) return n;
      let skipped = 0;
      for (const r of stale) {
        const resealed = this.vault.seal(this.vault.open(r, credentialAad(r)), credentialAad(r));
        // Only over what was read: a refresh that saved fresher tokens meanwhile (sealed with the current key) wins.
        if (await this.store.replaceIf({ ...r, ...resealed }, r.sealed)) n++;
        else skipped++;
      }
      // No progress (each changed under us, e.g. another replica still sealing with an older key): stop rather than spin.
      if (skipped === stale.length) return n;
    }
  }
}
