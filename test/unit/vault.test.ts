/**
 * The vault (src/upstream/auth/vault.ts, keyring.ts): AES-256-GCM seals bound
 * to their store key, key rotation (old keys open, the current one seals,
 * reseal moves everything to it), and the raw SQLite file and Redis values
 * holding no token. The config reads EMCEEPEE_VAULT_KEY.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { loadConfig } from "../../src/config/load.js";
import { sweepStore } from "../../src/server/recovery.js";
import { GatewayError } from "../../src/errors.js";
import type { CredentialKey, Store } from "../../src/store/contracts.js";
import { openStore } from "../../src/store/open.js";
import { loadKeys, parseKeys } from "../../src/upstream/auth/keyring.js";
import { CredentialVault, Vault } from "../../src/upstream/auth/vault.js";
import { ManualClock } from "../fixtures/manual-clock.js";
import { redisSkipReason, startRedis } from "../helpers/redis.js";

const newKey = () => randomBytes(32).toString("base64");
const ALICE: CredentialKey = { issuer: "https://idp.example", subject: "alice", upstream: "gh", slot: "oauth" };
const TOKEN = "gho_SECRET_access_token_4f1c9d";
const REFRESH = "ghr_SECRET_refresh_token_77ab";

function vaultOver(store: Store, keys: string): CredentialVault {
  return new CredentialVault(new Vault(parseKeys(keys, "test")), store.credentials, () => 1000);
}

describe("vault: sealing", () => {
  test("a sealed value opens with its additional data only; an altered or moved value does not", () => {
    const v = new Vault(parseKeys(newKey(), "test"));
    const s = v.seal(TOKEN, "row-a");
    assert.ok(!Buffer.from(s.sealed, "base64url").toString("latin1").includes(TOKEN));
    assert.equal(v.open(s, "row-a"), TOKEN);
    assert.throws(
      () => v.open(s, "row-b"),
      (e: unknown) => e instanceof GatewayError && e.code === "EMCP_VAULT_UNAVAILABLE" && !e.message.includes(TOKEN),
    );
    const raw = Buffer.from(s.sealed, "base64url");
    raw[14]! ^= 1;
    assert.throws(() => v.open({ ...s, sealed: raw.toString("base64url") }, "row-a"), /does not open/);
    assert.notEqual(v.seal(TOKEN, "row-a").sealed, s.sealed, "a fresh nonce per seal");
  });

  test("a value of a key that is not configured names the key id and what to do", () => {
    const old = new Vault(parseKeys(newKey(), "test"));
    const s = old.seal(TOKEN, "x");
    const other = new Vault(parseKeys(newKey(), "test"));
    assert.throws(
      () => other.open(s, "x"),
      (e: unknown) => e instanceof GatewayError && e.message.includes(s.keyId) && /gateway\.vault\.keys/.test(e.message),
    );
  });

  test("bad keys are config errors that name the setting and never echo the text", () => {
    assert.throws(
      () => parseKeys("c2hvcnQ=", "gateway.vault.keys"),
      (e: unknown) => e instanceof GatewayError && e.code === "EMCP_CONFIG_INVALID" && /32 bytes/.test(e.message) && !e.message.includes("c2hvcnQ"),
    );
    assert.throws(() => parseKeys(" , ", "gateway.vault.keys"), /holds no key/);
    assert.equal(loadKeys({}), undefined);
    assert.throws(() => loadKeys({ keyFile: "/nonexistent/vault.keys" }), /cannot read gateway\.vault\.keyFile/);
  });

  test("EMCEEPEE_VAULT_KEY fills gateway.vault.keys; a key file is read relative to the config", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "emceepee-vault-"));
    try {
      const key = newKey();
      const file = path.join(dir, "config.json");
      await writeFile(file, JSON.stringify({ mcpServers: {} }));
      assert.equal((await loadConfig({ file, env: { EMCEEPEE_VAULT_KEY: key } })).gateway.vault.keys, key);
      await writeFile(path.join(dir, "vault.keys"), `${key}\n`);
      await writeFile(file, JSON.stringify({ mcpServers: {}, gateway: { vault: { keyFile: "vault.keys" } } }));
      const cfg = await loadConfig({ file, env: {} });
      assert.equal(cfg.gateway.vault.keyFile, path.join(dir, "vault.keys"));
      assert.equal(loadKeys(cfg.gateway.vault)?.[0]?.key.toString("base64"), key);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("vault: rotation", () => {
  test("old keys still open, new writes use the current key, reseal moves every value to it", async () => {
    const store = await openStore({ kind: "memory" }, { clock: new ManualClock() });
    try {
      const k1 = newKey();
      const k2 = newKey();
      const before = vaultOver(store, k1);
      await before.put(ALICE, { access_token: TOKEN });
      await before.put({ ...ALICE, subject: "bob" }, { access_token: "bob-token" });
      const rotated = vaultOver(store, `${k2},${k1}`);
      assert.deepEqual(await rotated.get(ALICE), { access_token: TOKEN }, "the old key still opens");
      await rotated.put({ ...ALICE, subject: "carol" }, { access_token: "carol-token" });
      assert.equal((await store.credentials.get({ ...ALICE, subject: "carol" }))?.keyId, rotated.vault.currentKeyId);
      assert.equal((await store.credentials.listNotSealedWith(rotated.vault.currentKeyId, 10)).length, 2);
      assert.equal(await rotated.reseal(1), 2);
      assert.equal((await store.credentials.listNotSealedWith(rotated.vault.currentKeyId, 10)).length, 0);
      const onlyNew = vaultOver(store, k2);
      assert.deepEqual(await onlyNew.get(ALICE), { access_token: TOKEN }, "after reseal the old key may go");
      assert.deepEqual(await onlyNew.get({ ...ALICE, subject: "bob" }), { access_token: "bob-token" });
      await assert.rejects(vaultOver(store, k1).get(ALICE), /not configured/);
    } finally {
      await store.close();
    }
  });

  test("a reseal never overwrites a fresher token saved between its read and its write (compare-and-set)", async () => {
    const store = await openStore({ kind: "memory" }, { clock: new ManualClock() });
    try {
      const k1 = newKey();
      const k2 = newKey();
      await vaultOver(store, k1).put(ALICE, { access_token: TOKEN, refresh_token: REFRESH });
      // The real store, with a refresh landing right after the reseal has read what it will re-seal.
      const rotated = vaultOver(store, `${k2},${k1}`);
      const racing: Store["credentials"] = Object.create(store.credentials) as Store["credentials"];
      racing.listNotSealedWith = async (keyId, limit) => {
        const stale = await store.credentials.listNotSealedWith(keyId, limit);
        if (stale.length > 0) await rotated.put(ALICE, { access_token: "fresh-access", refresh_token: "fresh-refresh" });
        return stale;
      };
      const resealing = new CredentialVault(rotated.vault, racing, () => 1000);
      assert.equal(await resealing.reseal(), 0, "the only stale value changed under it");
      assert.deepEqual(await rotated.get(ALICE), { access_token: "fresh-access", refresh_token: "fresh-refresh" });
      assert.equal((await store.credentials.listNotSealedWith(rotated.vault.currentKeyId, 10)).length, 0);
    } finally {
      await store.close();
    }
  });
});

describe("vault: at rest", () => {
  test("the raw SQLite file (and its WAL) holds no token", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "emceepee-vault-"));
    try {
      const file = path.join(dir, "state.db");
      const store = await openStore({ kind: "sqlite", path: file }, { clock: new ManualClock() });
      const v = vaultOver(store, newKey());
      await v.put(ALICE, { access_token: TOKEN, refresh_token: REFRESH }, { scopes: ["repo"] });
      assert.deepEqual(await v.get(ALICE), { access_token: TOKEN, refresh_token: REFRESH });
      const wal = await readFile(`${file}-wal`).catch(() => Buffer.alloc(0));
      await store.close();
      for (const bytes of [await readFile(file), wal]) {
        const text = bytes.toString("latin1");
        assert.ok(!text.includes(TOKEN) && !text.includes(REFRESH), "no token in the file");
        assert.ok(!text.includes("SECRET"));
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  const skip = redisSkipReason();
  test("every Redis value under the prefix holds no token", { skip }, async () => {
    const server = await startRedis();
    after(() => server.stop());
    const store = await openStore({ kind: "redis", url: server.url, keyPrefix: "vt:" }, { clock: new ManualClock() });
    const raw = new Redis(server.url);
    try {
      const v = vaultOver(store, newKey());
      await v.put(ALICE, { access_token: TOKEN, refresh_token: REFRESH });
      assert.deepEqual(await v.get(ALICE), { access_token: TOKEN, refresh_token: REFRESH });
      const keys = await raw.keys("vt:*");
      assert.ok(keys.length > 0);
      for (const key of keys) {
        const type = await raw.type(key);
        const values = type === "hash" ? await raw.hvals(key) : type === "set" ? await raw.smembers(key) : [String(await raw.get(key))];
        for (const value of values) assert.ok(!value.includes(TOKEN) && !value.includes(REFRESH) && !value.includes("SECRET"), `${key} holds no token`);
      }
    } finally {
      raw.disconnect();
      await store.close();
    }
  });
});

describe("started OAuth flows", () => {
  test("the store sweep deletes those past their expiry (a person who never came back leaves nothing)", async () => {
    const store = await openStore({ kind: "memory" }, { clock: new ManualClock() });
    try {
      const flow = (state: string, expiresAt: number) => ({
        state,
        issuer: "i",
        subject: "s",
        upstream: "u",
        authIssuer: "https://as.example",
        clientId: "c",
        verifierSealed: "x",
        keyId: "k",
        redirectUri: "https://gw.example/console/oauth/callback",
        resource: "https://u.example/mcp",
        scopes: [],
        createdAt: 0,
        expiresAt,
      });
      await store.oauthFlows.put(flow("gone", 1000), 10);
      await store.oauthFlows.put(flow("kept", 9000), 10);
      assert.equal((await sweepStore(store, 5000)).oauthFlows, 1);
      assert.equal(await store.oauthFlows.count(), 1);
    } finally {
      await store.close();
    }
  });
});
