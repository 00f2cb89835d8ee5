/**
 * The vault's keys (docs/adr/0027-upstream-identity.md): AES-256 keys given as
 * base64 (32 bytes each), separated by commas or new lines, the first the
 * current one (new seals), the others only for opening what they sealed.
 * Each key's id is the first 16 hex digits of its SHA-256, so an operator
 * never names keys and a stored value says which key opens it.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { ErrorCodes, GatewayError, errorMessage } from "../../errors.js";

export interface VaultKey {
  readonly id: string;
  readonly key: Buffer;
}

/** Where the keys come from: the text itself (gateway.vault.keys or EMCEEPEE_VAULT_KEY) or a file holding it. */
export interface KeySource {
  keys?: string | undefined;
  keyFile?: string | undefined;
}

export function keyIdOf(key: Buffer): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 16);
}

/** The keys of `text` ("where" names the setting in errors; the text itself never appears in one). */
export function parseKeys(text: string, where: string): VaultKey[] {
  const parts = text
    .split(/[\s,]+/)
    .map((p) => p.trim())
    .filter((p) => p.length > 0);
  if (parts.length === 0) throw keyError(`${where} holds no key`);
  const keys = parts.map((part, i) => {
    const key = /^[A-Za-z0-9+/_-]+={0,2}$/.test(part) ? Buffer.from(part, "base64") : Buffer.alloc(0);
    if (key.length !== 32) throw keyError(`key ${i + 1} of ${where} is not 32 bytes of base64 (it decodes to ${key.length} bytes)`);
    return { id: keyIdOf(key), key };
  });
  return keys.filter((k, i) => keys.findIndex((o) => o.id === k.id) === i);
}

/** The keys of the configured source; undefined when none is configured (the vault is then off). */
export function loadKeys(source: KeySource): VaultKey[] | undefined {
  if (source.keys !== undefined) return parseKeys(source.keys, "gateway.vault.keys (or EMCEEPEE_VAULT_KEY)");
  if (source.keyFile === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(source.keyFile, "utf8");
  } catch (err) {
    throw keyError(`cannot read gateway.vault.keyFile ${source.keyFile}: ${errorMessage(err)}`);
  }
  return parseKeys(text, `gateway.vault.keyFile ${source.keyFile}`);
}

function keyError(problem: string): GatewayError {
  return new GatewayError(
    ErrorCodes.CONFIG_INVALID,
    `${problem}; give one or more AES-256 keys as base64, the current one first, e.g. from \`openssl rand -base64 32\` (docs/config.md, Vault)`,
  );
}
