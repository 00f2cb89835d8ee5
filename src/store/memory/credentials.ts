/** The vault's sealed credentials and started OAuth flows in Maps; see CredentialStore and OAuthFlowStore. */
import type { CredentialKey, CredentialRecord, CredentialStore, OAuthFlowRecord, OAuthFlowStore } from "../contracts.js";
import { jsonCopy } from "../policy.js";
import type { MemoryGuard } from "./guard.js";
import { MemoryTakeOnceStore } from "./take-once.js";

/** One string per key (JSON of its parts: no separator can be forged by a subject). */
export function credentialId(k: CredentialKey): string {
  return JSON.stringify([k.issuer, k.subject, k.upstream, k.slot]);
}

export function byUpstreamAndSlot(a: CredentialRecord, b: CredentialRecord): number {
  return a.upstream < b.upstream ? -1 : a.upstream > b.upstream ? 1 : a.slot < b.slot ? -1 : a.slot > b.slot ? 1 : 0;
}

export class MemoryCredentialStore implements CredentialStore {
  private readonly records = new Map<string, CredentialRecord>();

  constructor(private readonly guard: MemoryGuard) {}

  async put(record: CredentialRecord): Promise<void> {
    this.guard.check();
    this.records.set(credentialId(record), jsonCopy(record));
  }

  async replaceIf(record: CredentialRecord, expectedSealed: string): Promise<boolean> {
    this.guard.check();
    const id = credentialId(record);
    if (this.records.get(id)?.sealed !== expectedSealed) return false;
    this.records.set(id, jsonCopy(record));
    return true;
  }

  async get(key: CredentialKey): Promise<CredentialRecord | undefined> {
    this.guard.check();
    const r = this.records.get(credentialId(key));
    return r && jsonCopy(r);
  }

  async delete(key: CredentialKey): Promise<boolean> {
    this.guard.check();
    return this.records.delete(credentialId(key));
  }

  async listByPrincipal(issuer: string, subject: string): Promise<CredentialRecord[]> {
    this.guard.check();
    return [...this.records.values()]
      .filter((r) => r.issuer === issuer && r.subject === subject)
      .sort(byUpstreamAndSlot)
      .map(jsonCopy);
  }

  async listNotSealedWith(keyId: string, limit: number): Promise<CredentialRecord[]> {
    this.guard.check();
    return [...this.records.values()]
      .filter((r) => r.keyId !== keyId)
      .slice(0, limit)
      .map(jsonCopy);
  }
}

/** Started upstream OAuth flows: take-once, expiring, bounded (the same Map as the console's logins). */
export class MemoryOAuthFlowStore extends MemoryTakeOnceStore<OAuthFlowRecord> implements OAuthFlowStore {}
