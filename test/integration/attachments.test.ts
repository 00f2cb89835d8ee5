/**
 * `?session=` attachments are bounded (design LM-1, `sessions.maxAttachmentsPerSession`),
 * in an in-process gateway over raw HTTP: beyond the cap `initialize` is refused with
 * EMCP_LIMIT_REACHED naming the setting; a DELETEd attachment frees its slot, and so
 * does one idle for `sessions.oneShotIdleMs`; an attachment's requests do not keep
 * the session it is attached to alive, and it ends with that session.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { createMetaServer } from "../../src/faces/meta/server.js";
import { McpEndpoint } from "../../src/http/mcp-endpoint.js";
import { connectClient, startGateway, type TestGateway } from "../helpers/gateway.js";
import { MCP_POST_HEADERS, initializeBody, pollFor, rawInitialize, rawRequest } from "../helpers/core-extra.js";

const HEADERS = { ...MCP_POST_HEADERS, "mcp-protocol-version": "2025-06-18" };

/** initialize with `?session=<owner>`: the status, the attachment's own session id, the body. */
async function attach(url: string, owner: string) {
  const res = await rawRequest(`${url}?session=${encodeURIComponent(owner)}`, { headers: { ...MCP_POST_HEADERS }, body: initializeBody() });
  return { status: res.status, id: res.headers["mcp-session-id"] as string | undefined, body: res.body };
}

function ping(url: string, id: string) {
  return rawRequest(url, { headers: { ...HEADERS, "mcp-session-id": id }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) });
}

async function withGateway(sessions: Record<string, unknown>, run: (gw: TestGateway) => Promise<void>): Promise<void> {
  const gw = await startGateway({ mcpServers: {}, gateway: { sessions: { sweepIntervalMs: 50, ...sessions } } });
  try {
    await run(gw);
  } finally {
    await gw.close();
  }
}

describe("attachments", { timeout: 300_000 }, () => {
  test("beyond maxAttachmentsPerSession initialize is refused with EMCP_LIMIT_REACHED naming the setting; DELETE frees the slot", async () => {
    await withGateway({ maxSessions: 5, maxAttachmentsPerSession: 3 }, async (gw) => {
      const owner = await rawInitialize(gw.url);
      const held = [];
      for (let i = 0; i < 3; i++) {
        const a = await attach(gw.url, owner);
        assert.equal(a.status, 200, a.body);
        held.push(a.id!);
      }
      const over = await attach(gw.url, owner);
      assert.equal(over.status, 503, over.body);
      assert.equal(over.id, undefined, "no session id for a refused attachment");
      const error = (JSON.parse(over.body) as { error: { message: string; data?: { code?: string } } }).error;
      assert.equal(error.data?.code, "EMCP_LIMIT_REACHED");
      assert.match(error.message, /gateway\.sessions\.maxAttachmentsPerSession/);

      const del = await rawRequest(gw.url, { method: "DELETE", headers: { ...HEADERS, "mcp-session-id": held[0]! } });
      assert.equal(del.status, 200);
      assert.ok(gw.gateway.context.sessions.get(owner), "ending an attachment does not end the session");
      const again = await attach(gw.url, owner);
      assert.equal(again.status, 200, `the DELETEd attachment's slot is free: ${again.body}`);
    });
  });

  test("an attachment idle for oneShotIdleMs gives its slot to a new one", async () => {
    // oneShotIdleMs: the three attaches below come well within it on a loaded machine.
    await withGateway({ maxAttachmentsPerSession: 2, oneShotIdleMs: 15_000 }, async (gw) => {
      // The owner keeps its GET stream open: it is still there, whatever oneShotIdleMs says.
      const client = await connectClient(gw.url);
      try {
        const owner = (client.transport as unknown as { sessionId: string }).sessionId;
        const first = await attach(gw.url, owner);
        const second = await attach(gw.url, owner);
        assert.deepEqual([first.status, second.status], [200, 200]);
        const refused = await attach(gw.url, owner);
        assert.equal(refused.status, 503, "both slots are held while their attachments are fresh");
        const third = await pollFor(
          async () => {
            const a = await attach(gw.url, owner);
            return a.status === 200 ? a : undefined;
          },
          "a slot given up by an idle attachment",
          60_000,
        );
        assert.ok(third.id);
        assert.equal((await ping(gw.url, first.id!)).status, 404, "the idle attachment that gave up its slot has ended");
        assert.equal((await ping(gw.url, third.id)).status, 200);
      } finally {
        await client.close();
      }
    });
  });

  test("an attachment's requests do not keep its session alive; the attachment ends with it", async () => {
    await withGateway({ idleTimeoutMs: 1_500 }, async (gw) => {
      const owner = await rawInitialize(gw.url);
      const a = await attach(gw.url, owner);
      assert.equal(a.status, 200, a.body);
      await pollFor(
        async () => {
          const res = await ping(gw.url, a.id!);
          return gw.gateway.context.sessions.get(owner) === undefined ? res : undefined;
        },
        "the session to expire by idleTimeoutMs while only its attachment sends requests",
        30_000,
        100,
      );
      assert.equal((await ping(gw.url, a.id!)).status, 404, "the attachment ended with its session");
    });
  });

  test("a session that ends while an attachment's face is starting keeps no binding or slot of it; the attach gets 404", async () => {
    await withGateway({}, async (gw) => {
      // An attachable endpoint whose meta face starts only when the test says (a face may connect upstreams first).
      let started!: () => void;
      const starting = new Promise<void>((resolve) => (started = resolve));
      let go!: () => void;
      const gate = new Promise<void>((resolve) => (go = resolve));
      const context = gw.gateway.context;
      const endpoint = new McpEndpoint(context, {
        face: async (session) => {
          started();
          await gate;
          return createMetaServer({ session, gateway: context });
        },
        connectAll: false,
        attachable: true,
        kind: { kind: "meta" },
      });
      const server = http.createServer((req, res) => void endpoint.handle(req, res));
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      try {
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
        const owner = await rawInitialize(gw.url);
        const attaching = attach(url, owner);
        await starting;
        assert.equal(endpoint.attachmentsOf(owner), 1, "the attachment holds a slot while its face starts");
        const del = await rawRequest(gw.url, { method: "DELETE", headers: { ...HEADERS, "mcp-session-id": owner } });
        assert.equal(del.status, 200);
        assert.equal(context.sessions.get(owner), undefined, "the session ended");
        go();
        const a = await attaching;
        assert.equal(a.status, 404, a.body);
        assert.match(a.body, /ended while attaching/);
        assert.equal(endpoint.sessionCount, 0, "no binding for the ended session");
        assert.equal(endpoint.attachmentsOf(owner), 0, "its slot is free");
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    });
  });
});
