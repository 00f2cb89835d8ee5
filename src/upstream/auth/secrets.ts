/**
 * Per-user secrets (issue 23, docs/adr/0027-upstream-identity.md §13): a server's secret slots, each person's value
 * sealed in the vault under (person, server, `secret:<slot>`) and put into the config a connection is made with
 * (stdio: env; remote: headers). A required slot the person has not filled fails with EMCP_CONSENT_REQUIRED whose
 * URL is the console's Connections page, so the waiting call resumes once it is saved (session/consent-wait.ts).
 * Values never leave here except into that config: not logged, shown, or put in errors.
 */
import { isStdioConfig, type SecretSlot, type ServerConfig } from "../../config/server-entry.js";
import { ErrorCodes, GatewayError } from "../../errors.js";
import type { CredentialStore } from "../../store/contracts.js";
import type { CredentialVault } from "./vault.js";

/** The credential slot a secret slot's value is sealed under (OAuth grants use "oauth"). */
export function secretSlotKey(slot: string): string {
  return `secret:${slot}`;
}

/** Longest value accepted (a token or an API key, not a file). */
export const MAX_SECRET_CHARS = 8192;

type Person = { issuer: string; subject: string };

/** One slot of one server as a person's Connections page shows it: whether it is filled, never its value. */
export interface SecretRow {
  server: string;
  slot: string;
  description?: string;
  /** Where the value goes: `env NAME` or `header Name`. */
  target: string;
  optional: boolean;
  set: boolean;
  updatedAt?: number;
}

export interface UpstreamSecretsOptions {
  vault: () => CredentialVault;
  credentials: () => CredentialStore;
  /** The console's Connections page, where a person fills their slots. */
  connectionsUrl: () => string;
  /** After a person's value was saved or removed: their live connections to the server are dropped (factory renew()). */
  changed?: ((server: string, person: Person) => void) | undefined;
}

export function hasSecrets(config: ServerConfig): boolean {
  return Object.keys(config.secrets ?? {}).length > 0;
}

const targetOf = (config: ServerConfig, name: string, slot: SecretSlot) => (isStdioConfig(config) ? `env ${slot.env ?? name}` : `header ${slot.header}`);

export class UpstreamSecrets {
  constructor(private readonly o: UpstreamSecretsOptions) {}

  /**
   * `config` with `person`'s values in place (stdio env, remote headers). Throws CONSENT_REQUIRED (details: server,
   * authorizationUrl = the Connections page, slot) for the first required slot they have not filled.
   */
  async resolve(server: string, config: ServerConfig, person: Person): Promise<ServerConfig> {
    const slots = Object.entries(config.secrets ?? {});
    if (slots.length === 0) return config;
    const values: Record<string, string> = {};
    for (const [name, slot] of slots) {
      const key = { issuer: person.issuer, subject: person.subject, upstream: server, slot: secretSlotKey(name) };
      const value = await this.o.vault().get<string>(key);
      if (value !== undefined) {
        if (isStdioConfig(config)) values[slot.env ?? name] = value;
        else values[slot.header!] = (slot.format ?? "{value}").replaceAll("{value}", value);
        continue;
      }
      if (slot.optional) continue;
      const url = this.o.connectionsUrl();
      throw new GatewayError(
        ErrorCodes.CONSENT_REQUIRED,
        `server ${server} needs your own value for ${JSON.stringify(name)}${slot.description ? ` (${slot.description})` : ""}: enter it on the gateway console's Connections page, ${url}; a waiting call goes on once it is saved`,
        { details: { server, authorizationUrl: url, slot: secretSlotKey(name) } },
      );
    }
    if (isStdioConfig(config)) return { ...config, env: { ...(config.env ?? {}), ...values } };
    return { ...config, headers: { ...(config.headers ?? {}), ...values } };
  }

  /** `person`'s slots of `servers` (name and config), filled or not. */
  async rows(person: Person, servers: readonly { name: string; config: ServerConfig }[]): Promise<SecretRow[]> {
    const mine = new Map(
      (await this.o.credentials().listByPrincipal(person.issuer, person.subject))
        .filter((r) => r.slot.startsWith("secret:"))
        .map((r) => [`${r.upstream} ${r.slot}`, r]),
    );
    return servers.flatMap(({ name: server, config }) =>
      Object.entries(config.secrets ?? {}).map(([slot, s]) => {
        const r = mine.get(`${server} ${secretSlotKey(slot)}`);
        return {
          server,
          slot,
          ...(s.description !== undefined ? { description: s.description } : {}),
          target: targetOf(config, slot, s),
          optional: s.optional === true,
          set: r !== undefined,
          ...(r ? { updatedAt: r.updatedAt } : {}),
        };
      }),
    );
  }

  /** Seals `value` as `person`'s for the slot (replacing theirs). BAD_ARGUMENTS for an empty, too long or multi-line value. */
  async save(person: Person, server: string, config: ServerConfig, slot: string, value: string): Promise<void> {
    this.slotOf(server, config, slot);
    if (value.length === 0) throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `the value for ${JSON.stringify(slot)} is empty; paste it, or use Remove`);
    if (value.length > MAX_SECRET_CHARS) {
      throw new GatewayError(
        ErrorCodes.BAD_ARGUMENTS,
        `the value for ${JSON.stringify(slot)} has ${value.length} characters, more than ${MAX_SECRET_CHARS}; paste the key or token only`,
      );
    }
    // Line breaks would split a header (and are never part of a key); NUL cannot be in an environment variable.
    if (/[\r\n\0]/.test(value)) {
      throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `the value for ${JSON.stringify(slot)} has a line break or NUL character; paste it on one line`);
    }
    await this.o.vault().put({ issuer: person.issuer, subject: person.subject, upstream: server, slot: secretSlotKey(slot) }, value);
    this.o.changed?.(server, person);
  }

  /** Forgets `person`'s value for the slot; false when there was none. */
  async remove(person: Person, server: string, config: ServerConfig, slot: string): Promise<boolean> {
    this.slotOf(server, config, slot);
    const gone = await this.o.vault().delete({ issuer: person.issuer, subject: person.subject, upstream: server, slot: secretSlotKey(slot) });
    this.o.changed?.(server, person);
    return gone;
  }

  private slotOf(server: string, config: ServerConfig, slot: string): SecretSlot {
    const s = config.secrets?.[slot];
    if (!s) throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `server ${server} has no secret slot ${JSON.stringify(slot)}; reload the Connections page`);
    return s;
  }
}
