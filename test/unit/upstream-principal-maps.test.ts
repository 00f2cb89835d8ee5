/**
 * The upstream factory's per-principal maps (issue 10's promise, issue 23): a person's principal-bound connections
 * (own and shared, here a stdio server with a secret slot, served in process) leave the maps when they end, and a
 * person's shared set closes when their last session leaves, so people who came and went leave nothing behind.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { parseConfig } from "../../src/config/load.js";
import { parseServerEntry } from "../../src/config/server-entry.js";
import { silentLogger } from "../../src/logging.js";
import { openStore } from "../../src/store/open.js";
import { systemClock } from "../../src/clock.js";
import { ChildProcessLimiter } from "../../src/upstream/children.js";
import type { UpstreamHandlers } from "../../src/upstream/client-handlers.js";
import { parseKeys } from "../../src/upstream/auth/keyring.js";
import { UpstreamSecrets } from "../../src/upstream/auth/secrets.js";
import { CredentialVault, Vault } from "../../src/upstream/auth/vault.js";
import { ServerRegistry } from "../../src/upstream/registry.js";
import { createUpstreams } from "../../src/upstream/sharing/factory.js";
import { inProcess, inProcessTransportFactory } from "../helpers/in-process.js";
import { waitFor } from "../helpers/tasks.js";

const handlers: UpstreamHandlers = {
  onElicit: () => Promise.reject(new Error("no elicitation here")),
  onSample: () => Promise.reject(new Error("no sampling here")),
  onNotification: () => undefined,
  onLog: () => undefined,
  onStderr: () => undefined,
  onListRoots: () => Promise.resolve({ roots: [] }),
  onDisconnect: () => undefined,
};

test("per-principal maps hold nothing for people whose connections (own and shared) have closed", async () => {
  const store = await openStore({ kind: "memory" });
  const vault = new CredentialVault(new Vault(parseKeys(randomBytes(32).toString("base64"), "test")), store.credentials, () => 1000);
  const secrets = new UpstreamSecrets({ vault: () => vault, credentials: () => store.credentials, connectionsUrl: () => "http://gw/console/connections" });
  const slot = { secrets: { TOKEN: {} } };
  const registry = new ServerRegistry();
  for (const [name, raw] of [
    ["own", { ...inProcess("slow"), ...slot }],
    ["sh", { ...inProcess("slow"), ...slot, sharing: "shared" }],
  ] as const) {
    const parsed = parseServerEntry(raw);
    assert.ok(parsed.ok);
    registry.add({ name, config: parsed.entry.config, addedAt: 0, addedBy: "config" });
  }
  const settings = parseConfig({ gateway: { upstream: { warmPool: 0 } } }).gateway;
  let ids = 0;
  const upstreams = createUpstreams({
    registry,
    settings,
    transportFactory: inProcessTransportFactory(),
    children: new ChildProcessLimiter(100),
    clientInfo: { name: "test", version: "0" },
    clock: systemClock,
    newId: () => `id${++ids}`,
    logger: silentLogger,
    store: () => store,
    secrets: () => secrets,
  });
  try {
    const people = Array.from({ length: 4 }, (_, i) => ({ issuer: "https://idp", subject: `p${i}` }));
    for (const p of people) {
      await secrets.save(p, "own", registry.require("own").config, "TOKEN", `value-${p.subject}`);
      await secrets.save(p, "sh", registry.require("sh").config, "TOKEN", `value-${p.subject}`);
    }
    const handles = [];
    for (const [i, p] of people.entries()) {
      // Two sessions per person: the shared set stays until the second leaves.
      for (const s of [0, 1]) {
        for (const server of ["own", "sh"]) {
          const h = upstreams.factory(server, { sessionId: `s${i}-${s}`, handlers, logger: silentLogger, principal: p });
          await h.connect();
          handles.push({ p, s, server, h });
        }
      }
    }
    assert.deepEqual(upstreams.perPrincipal(), { connections: 8, shared: 4, principals: 4, stateless: 0 });
    // The first session of each person leaves: their shared connection stays for the second.
    for (const { h } of handles.filter((x) => x.s === 0)) await h.close();
    assert.deepEqual(upstreams.perPrincipal(), { connections: 8, shared: 4, principals: 4, stateless: 0 });
    const sharedOfP0 = handles.find((x) => x.p === people[0] && x.s === 1 && x.server === "sh")!.h;
    assert.equal(sharedOfP0.status, "connected");
    for (const { h } of handles.filter((x) => x.s === 1)) await h.close();
    // The shared sets are forgotten at once; their connections close in the background.
    assert.equal(upstreams.perPrincipal().shared, 0);
    await waitFor(() => upstreams.perPrincipal().connections === 0 || undefined, "every connection ended");
    assert.deepEqual(upstreams.perPrincipal(), { connections: 0, shared: 0, principals: 0, stateless: 0 });

    // Someone coming back gets a new shared set and connection, which serves calls.
    const again = upstreams.factory("sh", { sessionId: "again", handlers, logger: silentLogger, principal: people[0] });
    await again.connect();
    assert.ok((await again.listToolsPage()).tools.length > 0);
    assert.deepEqual(upstreams.perPrincipal(), { connections: 1, shared: 1, principals: 1, stateless: 0 });
    await again.close();
    await waitFor(() => upstreams.perPrincipal().connections === 0 || undefined, "its connection ended");
    assert.deepEqual(upstreams.perPrincipal(), { connections: 0, shared: 0, principals: 0, stateless: 0 });
  } finally {
    await upstreams.close();
    await store.close();
  }
});
