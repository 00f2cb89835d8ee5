/**
 * Bridge 3 across replicas (ADR 0032, "MRTR bridges" §5), with real
 * processes: a redis-server of the test's own and two `emceepee serve`
 * replicas with `gateway.cluster` on. An SDK v2 client pinned to 2026-07-28
 * calls server-everything's trigger-elicitation-request on replica 1 (which
 * parks the call) and sends its retry to replica 2, which passes it to
 * replica 1 and streams back the result. Then the owner is SIGKILLed with a
 * call parked: the retry on replica 2 is refused at once, naming the dead
 * replica, without waiting for its lease to run out. Bridge 1 (a modern
 * upstream, the dual-era reference server over HTTP): its sealed
 * requestState used on replica 2 is refused as a replay on replica 1 (the
 * single-use mark is in Redis).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from "@modelcontextprotocol/client";
import { everythingStdio } from "../helpers/gateway.js";
import { waitExit, type RunningCli } from "../helpers/core-extra.js";
import { startReplicaSet, type ReplicaSet } from "../helpers/era-setups.js";
import { MODERN, modernRequest } from "../helpers/modern-requests.js";
import { crash } from "../helpers/processes.js";
import { redisSkipReason } from "../helpers/redis.js";
import { startModernReferenceServer, type ModernReferenceServer } from "../fixtures/modern-reference-server.js";

const SECRET = "mrtr-replicas-secret-0123456789";
/** Long, so that "refused at once" is told apart from "refused once the dead owner's heartbeat ran out". */
const LEASE_MS = 60_000;
const CAPS = { elicitation: { form: {} } };
const T = { timeout: 300_000 };
const skip = redisSkipReason();

if (skip !== undefined) {
  it("MRTR across replicas", { skip }, () => undefined);
} else {
  describe("a parked call's retry on another replica", () => {
    let set: ReplicaSet;
    let upstream: ModernReferenceServer;
    const replicas: Array<{ id: string; base: string; served: RunningCli }> = [];

    async function startReplica(id: string): Promise<{ id: string; base: string; served: RunningCli }> {
      // No warm spare (upstream.warmPool 0): not what this file tests, and one server-everything fewer per replica (issue 21).
      const config = { mcpServers: { everything: everythingStdio(), modern: { url: upstream.url } }, gateway: { upstream: { warmPool: 0 } } };
      return { id, ...(await set.start(id, config, LEASE_MS)) };
    }

    before(async () => {
      set = await startReplicaSet("mrtr-replicas", SECRET);
      upstream = await startModernReferenceServer();
      replicas.push(...(await Promise.all(["r1", "r2"].map((id) => startReplica(id)))));
    });
    after(async () => {
      await set?.close();
      await upstream?.close();
    });

    const face = (i: number) => `${replicas[i]!.base}/servers/everything/mcp`;

    it("an SDK v2 client's retry on replica 2 is answered by replica 1, which parked the call", T, async () => {
      // Every request goes to replica 1, except a retry (it carries requestState), which goes to replica 2.
      const sentTo: string[] = [];
      const fetchSplit = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
        const retry = typeof init?.body === "string" && init.body.includes('"requestState"');
        sentTo.push(retry ? "r2" : "r1");
        return fetch(retry ? face(1) : input, init);
      };
      const client = new ModernClient({ name: "mrtr-replicas", version: "1" }, { capabilities: CAPS, versionNegotiation: { mode: { pin: MODERN } } });
      const asked: string[] = [];
      client.setRequestHandler("elicitation/create", (request) => {
        asked.push(request.params.message);
        return { action: "accept", content: { name: "Across Replicas", check: true } };
      });
      await client.connect(new ModernTransport(new URL(face(0)), { fetch: fetchSplit }));
      try {
        const result = await client.callTool({ name: "trigger-elicitation-request", arguments: {} });
        assert.match(JSON.stringify(result.content), /Across Replicas/, JSON.stringify(result));
        assert.equal(asked.length, 1, `asked once: ${asked.join(" | ")}`);
        assert.ok(sentTo.includes("r2"), `the retry went to replica 2: ${sentTo.join(", ")}`);
      } finally {
        await client.close();
      }
    });

    it("bridge 1: a modern upstream's sealed state used on replica 2 is refused as a replay on replica 1", T, async () => {
      const modernFace = (i: number) => `${replicas[i]!.base}/servers/modern/mcp`;
      const call = { name: "test_input_required_result_request_state", arguments: {} };
      const first = await modernRequest(modernFace(0), "tools/call", call, { capabilities: CAPS });
      assert.equal(first.body.result?.resultType, "input_required", JSON.stringify(first.body));
      const key = Object.keys(first.body.result.inputRequests as object)[0]!;
      const retry = { ...call, inputResponses: { [key]: { action: "accept", content: { ok: true } } }, requestState: first.body.result.requestState };
      const used = await modernRequest(modernFace(1), "tools/call", retry, { capabilities: CAPS });
      assert.equal(used.body.result?.resultType, "complete", JSON.stringify(used.body));
      const replay = await modernRequest(modernFace(0), "tools/call", retry, { capabilities: CAPS });
      assert.equal(replay.body.error?.data?.code, "EMCP_BAD_REQUEST_STATE", JSON.stringify(replay.body));
      assert.match(replay.body.error.message, /used already/);
    });

    it("with the owner killed, the retry on replica 2 is refused at once, naming it", T, async () => {
      const call = { name: "trigger-elicitation-request", arguments: {} };
      const asked = await modernRequest(face(0), "tools/call", call, { capabilities: CAPS });
      assert.equal(asked.body.result?.resultType, "input_required", JSON.stringify(asked.body));
      const key = Object.keys(asked.body.result.inputRequests as object)[0]!;

      const owner = replicas[0]!.served.child;
      crash(owner); // and its server-everything, which a SIGKILLed gateway leaves running (its elicitation pending)
      await waitExit(owner, 30_000);
      const started = Date.now();
      const retry = await modernRequest(
        face(1),
        "tools/call",
        { ...call, inputResponses: { [key]: { action: "accept", content: { name: "Too late" } } }, requestState: asked.body.result.requestState },
        { capabilities: CAPS },
      );
      const waited = Date.now() - started;
      assert.equal(retry.body.error?.code, -32602, JSON.stringify(retry.body));
      assert.equal(retry.body.error?.data?.code, "EMCP_BAD_REQUEST_STATE");
      assert.equal(retry.body.error?.data?.reason, "parked_owner_gone", JSON.stringify(retry.body));
      assert.match(retry.body.error.message, /replica r1\.\S+, which has stopped or cannot be reached/);
      // Not after waiting for the dead owner's heartbeat to expire (its lease is LEASE_MS).
      assert.ok(waited < LEASE_MS / 2, `refused after ${waited} ms`);
      // Replica 2 serves the same call afresh.
      const again = await modernRequest(face(1), "tools/call", call, { capabilities: CAPS });
      assert.equal(again.body.result?.resultType, "input_required", JSON.stringify(again.body));
    });
  });
}
