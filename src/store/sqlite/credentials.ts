/** The vault's sealed credentials (`credentials`) and started OAuth flows (`oauth_flows`, take-once), schema version 9. */
import type { CredentialKey, CredentialRecord, CredentialStore, OAuthFlowRecord, OAuthFlowStore } from "../contracts.js";
import type { SqliteDb } from "./db.js";

const KEY = "issuer = ? AND subject = ? AND upstream = ? AND slot = ?";
const keyArgs = (k: CredentialKey) => [k.issuer, k.subject, k.upstream, k.slot];
const parse = (rows: unknown[]) => (rows as Array<{ record: string }>).map((r) => JSON.parse(r.record) as CredentialRecord);

export class SqliteCredentialStore implements CredentialStore {
  constructor(private readonly db: SqliteDb) {}

  async put(r: CredentialRecord): Promise<void> {
    this.db.write("store a credential", () => {
      this.db
        .stmt("INSERT OR REPLACE INTO credentials (issuer, subject, upstream, slot, key_id, record) VALUES (?, ?, ?, ?, ?, ?)")
        .run(...keyArgs(r), r.keyId, JSON.stringify(r));
    });
  }

  async replaceIf(r: CredentialRecord, expectedSealed: string): Promise<boolean> {
    return this.db.write("re-seal a credential", () => {
      const row = this.db.stmt(`SELECT record FROM credentials WHERE ${KEY}`).get(...keyArgs(r));
      if (row === undefined || parse([row])[0]!.sealed !== expectedSealed) return false;
      this.db.stmt(`UPDATE credentials SET key_id = ?, record = ? WHERE ${KEY}`).run(r.keyId, JSON.stringify(r), ...keyArgs(r));
      return true;
    });
  }

  async get(key: CredentialKey): Promise<CredentialRecord | undefined> {
    const row = this.db.read("read a credential", () => this.db.stmt(`SELECT record FROM credentials WHERE ${KEY}`).get(...keyArgs(key)));
    return row === undefined ? undefined : parse([row])[0];
  }

  async delete(key: CredentialKey): Promise<boolean> {
    return this.db.write("delete a credential", () => this.db.stmt(`DELETE FROM credentials WHERE ${KEY}`).run(...keyArgs(key)).changes > 0);
  }

  async listByPrincipal(issuer: string, subject: string): Promise<CredentialRecord[]> {
    return parse(
      this.db.read("list a principal's credentials", () =>
        this.db.stmt("SELECT record FROM credentials WHERE issuer = ? AND subject = ? ORDER BY upstream, slot").all(issuer, subject),
      ),
    );
  }

  async listNotSealedWith(keyId: string, limit: number): Promise<CredentialRecord[]> {
    return parse(this.db.read("list credentials to re-seal", () => this.db.stmt("SELECT record FROM credentials WHERE key_id <> ? LIMIT ?").all(keyId, limit)));
  }
}

export class SqliteOAuthFlowStore implements OAuthFlowStore {
  constructor(private readonly db: SqliteDb) {}

  async put(record: OAuthFlowRecord, max: number): Promise<void> {
    this.db.write("store a started OAuth flow", () => {
      this.db.stmt("DELETE FROM oauth_flows WHERE state = ? OR expires_at <= ?").run(record.state, record.createdAt);
      const { n } = this.db.stmt("SELECT count(*) AS n FROM oauth_flows").get() as { n: number };
      if (n >= max) {
        this.db.stmt("DELETE FROM oauth_flows WHERE state IN (SELECT state FROM oauth_flows ORDER BY expires_at, state LIMIT ?)").run(n - max + 1);
      }
      this.db.stmt("INSERT INTO oauth_flows (state, expires_at, record) VALUES (?, ?, ?)").run(record.state, record.expiresAt, JSON.stringify(record));
    });
  }

  async take(state: string, now: number): Promise<OAuthFlowRecord | undefined> {
    return this.db.write("take a started OAuth flow", () => {
      const row = this.db.stmt("SELECT expires_at, record FROM oauth_flows WHERE state = ?").get(state) as { expires_at: number; record: string } | undefined;
      if (!row) return undefined;
      this.db.stmt("DELETE FROM oauth_flows WHERE state = ?").run(state);
      return row.expires_at <= now ? undefined : (JSON.parse(row.record) as OAuthFlowRecord);
    });
  }

  async peek(state: string, now: number): Promise<OAuthFlowRecord | undefined> {
    const row = this.db.read("read a started OAuth flow", () =>
      this.db.stmt("SELECT record FROM oauth_flows WHERE state = ? AND expires_at > ?").get(state, now),
    ) as { record: string } | undefined;
    return row === undefined ? undefined : (JSON.parse(row.record) as OAuthFlowRecord);
  }

  async deleteExpired(now: number): Promise<number> {
    return this.db.write("delete expired OAuth flows", () => this.db.stmt("DELETE FROM oauth_flows WHERE expires_at <= ?").run(now).changes);
  }

  async count(): Promise<number> {
    return this.db.read("count started OAuth flows", () => (this.db.stmt("SELECT count(*) AS n FROM oauth_flows").get() as { n: number }).n);
  }
}
