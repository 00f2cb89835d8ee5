/**
 * The meta face when an upstream gives up on its own elicitation (its request timed out on its side, or it
 * sent notifications/cancelled): the request leaves get_elicitations, the activity's pending list and the store
 * at once, and an answer to it says it was withdrawn. Upstream: test/fixtures/brief-elicit-server.ts in this process.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { isStdioConfig } from "../../src/config/server-entry.js";
import type { TransportFactory } from "../../src/upstream/transport-types.js";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { inbox } from "../../src/console/read-model.js";
import { call, type TestGateway } from "../helpers/gateway.js";
import { startInProcessGateway } from "../helpers/in-process.js";
import { ClientPool, allText, elicitations, errorCodeOf, eventually, promote, sessionOf, waitTerminal } from "../helpers/async-extra.js";
import { createBriefElicitServer } from "../fixtures/brief-elicit-server.js";

const COMMAND = "emceepee-test-brief-elicit";

/** Links each connection to `brief` to a fresh brief-elicit server over InMemoryTransport. */
const briefFactory: TransportFactory = (name, config) => {
  if (!isStdioConfig(config) || config.command !== COMMAND) throw new Error(`no transport for ${name} in this test`);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  createBriefElicitServer()
    .connect(serverSide)
    .catch((err: unknown) => clientSide.onerror?.(err instanceof Error ? err : new Error(String(err))));
  return { transport: clientSide };
};

let gw: TestGateway;
const pool = new ClientPool(() => gw);

before(async () => {
  gw = await startInProcessGateway({ mcpServers: { brief: { command: COMMAND, args: [] } } }, { transportFactory: briefFactory });
});

after(async () => {
  await pool.closeAll();
  await gw?.close();
});

/** Where a pending request could still be seen: get_elicitations, the session's list (await_activity), the console inbox, the store. */
async function seenAnywhere(c: Client, requestId: string): Promise<string[]> {
  const session = sessionOf(gw, c);
  const where: string[] = [];
  if ((await elicitations(c, "brief")).some((e) => e.requestId === requestId)) where.push("get_elicitations");
  if (session.pending.list("elicitation").some((e) => e.requestId === requestId)) where.push("the session's pending list");
  const console = inbox({ context: gw.gateway.context, childProcesses: () => 0, reconnects: new Map() });
  if (console.some((item) => item.info.requestId === requestId)) where.push("the console inbox");
  if ((await gw.gateway.context.store.pending.get(requestId)) !== undefined) where.push("the store");
  return where;
}

/** Answering a withdrawn request: EMCP_UNKNOWN_REQUEST saying its server withdrew it. */
async function assertWithdrawnAnswer(c: Client, requestId: string): Promise<void> {
  const answer = await call(c, "respond_to_elicitation", { request_id: requestId, action: "accept", content: { answer: "late" } });
  assert.equal(answer.isError, true, allText(answer));
  assert.equal(errorCodeOf(answer), "EMCP_UNKNOWN_REQUEST", allText(answer));
  assert.match(allText(answer), /withdrawn by its server/, allText(answer));
}

test("the upstream's first elicitation (request id 0) times out on its side: it leaves every list and the store; an answer says it was withdrawn", async (t) => {
  const c = await pool.open(t);
  const p = await promote(c, "brief", "ask-briefly", { ms: 1_500 }, 0);
  const asked = await eventually("the elicitation listed", async () => (await elicitations(c, "brief"))[0]);
  assert.deepEqual(await seenAnywhere(c, asked.requestId), ["get_elicitations", "the session's pending list", "the console inbox", "the store"]);
  await waitTerminal(c, p.taskId); // the call ends with the server's own "not answered: … Request timed out"
  // The upstream's notifications/cancelled arrives before its answer to the call: nothing is left by then.
  assert.deepEqual(await seenAnywhere(c, asked.requestId), [], "the server gave up on it: nowhere to be seen");
  await assertWithdrawnAnswer(c, asked.requestId);
});

test("a later elicitation the upstream withdraws with notifications/cancelled leaves at once, while its call still runs", async (t) => {
  const c = await pool.open(t);
  // One answered first, so that the withdrawn one is not the upstream's request 0.
  const first = await promote(c, "brief", "ask-briefly", { ms: 120_000 }, 0);
  const answeredOne = await eventually("the first elicitation listed", async () => (await elicitations(c, "brief"))[0]);
  const answer = await call(c, "respond_to_elicitation", { request_id: answeredOne.requestId, action: "decline" });
  assert.notEqual(answer.isError, true, allText(answer));
  assert.equal((await waitTerminal(c, first.taskId)).status, "completed");

  const p = await promote(c, "brief", "ask-then-withdraw", {}, 0);
  const asked = await eventually("the elicitation listed", async () => (await elicitations(c, "brief"))[0]);
  assert.notEqual(asked.requestId, answeredOne.requestId);
  const withdrawn = await call(c, "execute_tool", { server: "brief", tool: "withdraw", args: {} });
  assert.match(allText(withdrawn), /withdrawn/, allText(withdrawn));
  await eventually("the withdrawn elicitation gone everywhere", async () => ((await seenAnywhere(c, asked.requestId)).length === 0 ? true : undefined));
  await assertWithdrawnAnswer(c, asked.requestId);
  await waitTerminal(c, p.taskId);
});
