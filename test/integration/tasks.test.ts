/**
 * Integration tests of MCP tasks through the gateway (issue #5), against
 * server-everything in this process (test/helpers/in-process.ts), its results
 * compared with a real server-everything's over stdio:
 * - task-augmented tools/call on the transparent faces, mapped onto upstream
 *   tasks (`simulate-research-query`, taskSupport `required`) or run by the
 *   gateway (`echo`, `forbidden`); tasks/get, tasks/result (with the queued
 *   elicitation forwarded), tasks/list, tasks/cancel, status notifications;
 * - receiver tasks: the upstream's task-augmented sampling/elicitation,
 *   answered natively or through the pending queue (meta face attached);
 * - emulation: a plain call of a task-only tool blocks with progress;
 * - the meta face's execute_tool on a task-only tool, with promotion;
 * - isolation between sessions, TTL expiry and retention, errors.
 * Task ids the clients see must always be the gateway's, never the upstream's.
 */
import { after, before, describe, test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { ErrorCode, RELATED_TASK_META_KEY, type CallToolResult, type Task } from "@modelcontextprotocol/sdk/types.js";
import { block, call, connectClient, drainEvents, TEST_SHARING, waitConnected, type TestGateway } from "../helpers/gateway.js";
import { startInProcessGateway } from "../helpers/in-process.js";
import {
  LONG,
  type Peer,
  RecordingTaskStore,
  connectDirect,
  connectFace,
  getTask,
  isTerminalTask,
  pollTask,
  rpcError,
  sessionOf,
  startTask,
  streamedResult,
  taskResult,
  text,
  upstreamIdOf,
  waitFor,
  withoutMeta,
  type PeerOptions,
} from "../helpers/tasks.js";

const RESEARCH = "simulate-research-query";
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const ELICIT_AND_SAMPLE = { elicitation: { form: {} }, sampling: {} };

let gw: TestGateway;
let store: RecordingTaskStore;
let base: string;
let direct: Peer;
/** What the direct client gets for a research topic (memoized: each run takes ~4 s). */
const directReports = new Map<string, Promise<string>>();

before(async () => {
  store = new RecordingTaskStore();
  gw = await startInProcessGateway({}, { store: store.bundle });
  base = gw.url.replace(/\/mcp$/, "");
  direct = await connectDirect();
});

after(async () => {
  await direct?.close();
  await gw?.close();
});

function directReport(topic: string): Promise<string> {
  let report = directReports.get(topic);
  if (!report) {
    report = streamedResult(direct.client, RESEARCH, { topic }).then(text);
    directReports.set(topic, report);
  }
  return report;
}

/** A transparent peer, closed when its test ends (t.after: the cases of a concurrent describe end at different times). */
async function peer(t: TestContext, path: string, options: PeerOptions = {}): Promise<Peer> {
  const p = await connectFace(`${base}${path}`, options);
  t.after(() => p.close());
  return p;
}

/** The meta-tools face attached to a transparent peer's session. */
async function attachMeta(t: TestContext, p: Peer) {
  const meta = await connectClient(`${base}/mcp?session=${encodeURIComponent(p.sessionId)}`, { name: "meta-attached" });
  t.after(() => meta.close());
  return meta;
}

/**
 * The describes whose cases wait on server-everything's research tasks (4 stages of 1 s, fixed) run their cases at
 * once (issue 21, docs/adr/0065): each case has its own sessions and peers, and checks only its own tasks (the store's
 * id sets only grow). Not with shared upstreams (EMCEEPEE_TEST_SHARING=shared): calls of two sessions at once on a
 * shared upstream have their elicitations refused (test/integration/sharing.test.ts), and the ambiguous cases elicit.
 */
const AT_ONCE = { concurrency: TEST_SHARING === "session" };

/** Every task id the peer ever saw is a gateway id (a ULID the gateway stored), never an upstream one. */
function assertOnlyGatewayIds(p: Peer): void {
  const seen = p.taskIdsSeen();
  for (const id of seen) {
    assert.ok(!store.upstreamIds.has(id), `the client saw upstream task id ${id}`);
    assert.match(id, ULID, `task id ${id} is not a gateway id`);
    assert.ok(store.gatewayIds.has(id), `task id ${id} was never a gateway task`);
  }
}

/** Drives a research task to its end through tasks/get polling; returns the statuses seen and the result. */
async function runResearchTask(p: Peer, name: string, topic: string): Promise<{ task: Task; statuses: Task[]; result: CallToolResult }> {
  const task = await startTask(p.client, name, { topic });
  const statuses = await pollTask(p.client, task.taskId, isTerminalTask, "terminal");
  const result = await taskResult(p.client, task.taskId);
  return { task, statuses, result };
}

describe("transparent face: task-augmented tools/call of an upstream task tool", AT_ONCE, () => {
  test("capabilities and tools/list advertise tasks for every tool", async (t) => {
    const p = await peer(t, "/servers/everything/mcp");
    const caps = p.client.getServerCapabilities();
    assert.deepEqual(caps?.tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } });
    const { tools } = await p.client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    assert.equal(byName.get(RESEARCH)?.execution?.taskSupport, "optional");
    assert.equal(byName.get("echo")?.execution?.taskSupport, "optional");
    assert.ok(tools.every((t) => t.execution?.taskSupport === "optional"));
  });

  test("simulate-research-query via /servers and /all: progress in tasks/get, result equals the direct one", async (t) => {
    const one = await peer(t, "/servers/everything/mcp");
    const all = await peer(t, "/all/mcp");
    const [expected, viaOne, viaAll] = await Promise.all([
      directReport("python"),
      runResearchTask(one, RESEARCH, "python"),
      runResearchTask(all, `everything__${RESEARCH}`, "python"),
    ]);
    assert.match(expected, /^# Research Report: python\n/);
    for (const [p, run] of [
      [one, viaOne],
      [all, viaAll],
    ] as const) {
      const { task, statuses, result } = run;
      assert.equal(task.status, "working");
      assert.match(task.taskId, ULID);
      const upstreamId = await upstreamIdOf(gw, p, task.taskId);
      assert.ok(upstreamId, "the gateway task is mapped onto an upstream task");
      assert.notEqual(upstreamId, task.taskId);
      // Progress: the upstream's status messages show through tasks/get, and change.
      const messages = new Set(statuses.filter((s) => s.status === "working").map((s) => s.statusMessage));
      assert.ok(messages.size >= 2, `statusMessage changes while working: ${JSON.stringify([...messages])}`);
      assert.equal(statuses.at(-1)?.status, "completed");
      assert.equal(text(result), expected);
      assert.deepEqual(result._meta?.[RELATED_TASK_META_KEY], { taskId: task.taskId });
      // notifications/tasks/status are forwarded under the gateway's id.
      const notices = p.notifications("notifications/tasks/status").filter((n) => n.taskId === task.taskId);
      assert.ok(notices.length >= 1, "the client heard notifications/tasks/status about its task");
      const listed = await p.client.experimental.tasks.listTasks(undefined, LONG);
      assert.ok(listed.tasks.some((t) => t.taskId === task.taskId && t.status === "completed"));
      assertOnlyGatewayIds(p);
    }
  });

  test("ambiguous: the queued elicitation reaches the client with the gateway's task id; the answer shapes the result", async (t) => {
    const p = await peer(t, "/servers/everything/mcp", {
      capabilities: ELICIT_AND_SAMPLE,
      elicit: () => ({ action: "accept", content: { interpretation: "programming" } }),
    });
    const task = await startTask(p.client, RESEARCH, { topic: "python", ambiguous: true });
    const upstreamId = await upstreamIdOf(gw, p, task.taskId);
    await pollTask(p.client, task.taskId, (t) => t.status === "input_required", "input_required");
    assert.equal(p.elicitations.length, 0, "the elicitation waits for tasks/result");
    const result = await taskResult(p.client, task.taskId);
    assert.equal(p.elicitations.length, 1);
    const elicitation = p.elicitations[0]!;
    assert.match(elicitation.message, /multiple interpretations/);
    assert.deepEqual(elicitation._meta?.[RELATED_TASK_META_KEY], { taskId: task.taskId });
    assert.notEqual(task.taskId, upstreamId);
    assert.match(text(result), /^# Research Report: python \(programming\)/);
    assert.match(text(result), /\*\*Clarification\*\*: programming/);
    assert.equal((await getTask(p.client, task.taskId)).status, "completed");
    assertOnlyGatewayIds(p);
  });

  test("tasks/cancel cancels the upstream task too", async (t) => {
    const p = await peer(t, "/servers/everything/mcp");
    const task = await startTask(p.client, RESEARCH, { topic: "cancel me" });
    const upstreamId = await upstreamIdOf(gw, p, task.taskId);
    assert.ok(upstreamId);
    await pollTask(p.client, task.taskId, (t) => t.statusMessage !== undefined, "started");
    const cancelled = await p.client.experimental.tasks.cancelTask(task.taskId, LONG);
    assert.equal(cancelled.taskId, task.taskId);
    assert.equal(cancelled.status, "cancelled");
    assert.equal((await getTask(p.client, task.taskId)).status, "cancelled");
    const conn = await sessionOf(gw, p).connection("everything");
    const upstream = await waitFor(async () => {
      const t = await conn.getTask(upstreamId);
      return t.status === "cancelled" ? t : undefined;
    }, "the upstream task to be cancelled");
    assert.equal(upstream.status, "cancelled");
    await rpcError(taskResult(p.client, task.taskId));
    assertOnlyGatewayIds(p);
  });

  test("TTL expiry ends the task (failed, says it expired), cancels the upstream task, then the gateway's sweep deletes the record", async () => {
    const expiring = new RecordingTaskStore();
    // Retention long enough for the checks below to read the expired task on a loaded machine.
    const gw2 = await startInProcessGateway(
      { gateway: { tasks: { completedRetentionMs: 10_000 }, sessions: { sweepIntervalMs: 300 } } },
      { store: expiring.bundle },
    );
    const p = await connectFace(`${gw2.url.replace(/\/mcp$/, "")}/servers/everything/mcp`);
    try {
      const session = sessionOf(gw2, p);
      const task = await startTask(p.client, RESEARCH, { topic: "too slow" }, 1500);
      assert.equal(task.ttl, 1500);
      const upstreamId = await upstreamIdOf(gw2, p, task.taskId);
      assert.ok(upstreamId);
      // The expiry is announced; tasks/get then shows it (within the retention period).
      const notice = await waitFor(
        () => p.notifications("notifications/tasks/status").find((n) => n.taskId === task.taskId && n.status !== "working"),
        "a terminal status notification",
      );
      assert.equal(notice.status, "failed");
      const got = await getTask(p.client, task.taskId);
      assert.equal(got.status, "failed");
      assert.match(got.statusMessage ?? "", /expired|TTL/i);
      const conn = await session.connection("everything");
      await waitFor(async () => ((await conn.getTask(upstreamId)).status === "cancelled" ? true : undefined), "the upstream task to be cancelled");
      // After completedRetentionMs the record is gone.
      const gone = await waitFor(
        async () => {
          try {
            await getTask(p.client, task.taskId);
            return undefined;
          } catch (err) {
            return err;
          }
        },
        "the expired task to be freed",
        60_000,
      );
      assert.match(String(gone), /not found/i);
      await waitFor(async () => ((await expiring.get(task.taskId)) === undefined ? true : undefined), "the sweep to delete the row");
      assert.equal(session.tasks.timerCount, 0);
    } finally {
      await p.close();
      await gw2.close();
    }
  });
});

describe("transparent face: gateway-owned tasks", () => {
  test("echo as a task: a gateway task whose result equals the direct one", async (t) => {
    const p = await peer(t, "/servers/everything/mcp");
    const task = await startTask(p.client, "echo", { message: "hello tasks" });
    assert.match(task.taskId, ULID);
    assert.equal(await upstreamIdOf(gw, p, task.taskId), undefined, "no upstream task behind echo");
    const statuses = await pollTask(p.client, task.taskId, isTerminalTask, "terminal");
    assert.equal(statuses.at(-1)?.status, "completed");
    const result = await taskResult(p.client, task.taskId);
    const expected = (await direct.client.callTool({ name: "echo", arguments: { message: "hello tasks" } })) as CallToolResult;
    assert.deepEqual(withoutMeta(result), expected);
    assert.deepEqual(result._meta?.[RELATED_TASK_META_KEY], { taskId: task.taskId });
    assertOnlyGatewayIds(p);
  });

  test("session isolation: another session cannot get, fetch, cancel or list a task", async (t) => {
    const a = await peer(t, "/servers/everything/mcp");
    const b = await peer(t, "/servers/everything/mcp");
    const done = await startTask(a.client, "echo", { message: "mine" });
    const running = await startTask(a.client, RESEARCH, { topic: "mine" });
    await pollTask(a.client, done.taskId, isTerminalTask, "terminal");
    for (const { taskId } of [done, running]) {
      // One at a time: started at once, an attempt that failed while an earlier one was awaited was an unhandled rejection
      // (the case failed with it, seen in a copy whose upstream cancel was broken: the answers' order changed).
      for (const attempt of [() => getTask(b.client, taskId), () => taskResult(b.client, taskId), () => b.client.experimental.tasks.cancelTask(taskId, LONG)]) {
        const err = await rpcError(attempt());
        assert.equal(err.code, ErrorCode.InvalidParams);
        assert.match(err.message, /not found/i);
      }
    }
    const listedB = await b.client.experimental.tasks.listTasks(undefined, LONG);
    assert.deepEqual(listedB.tasks, []);
    const listedA = (await a.client.experimental.tasks.listTasks(undefined, LONG)).tasks.map((t) => t.taskId);
    assert.deepEqual(listedA.sort(), [done.taskId, running.taskId].sort());
    // Nothing B did touched A's task.
    assert.equal((await getTask(a.client, running.taskId)).status, "working");
    assert.equal((await a.client.experimental.tasks.cancelTask(running.taskId, LONG)).status, "cancelled");
  });
});

describe("receiver tasks: the upstream's task-augmented sampling and elicitation", () => {
  const answered = (r: CallToolResult) => {
    const t = text(r);
    assert.doesNotMatch(t, /\[SYNC\]/, "the upstream got a task, not a synchronous answer");
    assert.match(t, /Task created: [0-9A-HJKMNP-TV-Z]{26}/, "the receiver task is the gateway's");
    return t;
  };

  test("a client with the capabilities answers natively", async (t) => {
    const p = await peer(t, "/servers/everything/mcp", {
      capabilities: ELICIT_AND_SAMPLE,
      elicit: () => ({ action: "accept", content: { name: "Ann", favoriteColor: "Blue" } }),
      sample: () => ({ model: "test-model", role: "assistant", content: { type: "text", text: "sampled natively" } }),
    });
    const [elicited, sampled] = await Promise.all([
      p.client.callTool({ name: "trigger-elicitation-request-async", arguments: {} }, undefined, LONG),
      p.client.callTool({ name: "trigger-sampling-request-async", arguments: { prompt: "hello" } }, undefined, LONG),
    ]);
    const e = answered(elicited as CallToolResult);
    assert.match(e, /\[COMPLETED\] User provided the requested information!/);
    assert.match(e, /- Name: Ann/);
    assert.match(e, /- Favorite Color: Blue/);
    const s = answered(sampled as CallToolResult);
    assert.match(s, /\[COMPLETED\] Async sampling completed!/);
    assert.match(s, /sampled natively/);
    assert.equal(p.elicitations.length, 1);
    assert.equal(p.samplings.length, 1);
    assert.match(JSON.stringify(p.samplings[0]?.messages), /hello/);
    assertOnlyGatewayIds(p);
  });

  test("a client without the capabilities answers through the pending queue (meta face attached)", async (t) => {
    const p = await peer(t, "/servers/everything/mcp");
    const meta = await attachMeta(t, p);
    const elicitCall = p.client.callTool({ name: "trigger-elicitation-request-async", arguments: {} }, undefined, LONG);
    const sampleCall = p.client.callTool({ name: "trigger-sampling-request-async", arguments: { prompt: "queued prompt" } }, undefined, LONG);
    const elicitation = await waitFor(
      async () => block<Array<{ requestId: string }>>(await call(meta, "get_elicitations"), "elicitations")?.[0],
      "a queued elicitation",
    );
    const sampling = await waitFor(
      async () => block<Array<{ requestId: string; messages: unknown }>>(await call(meta, "get_sampling_requests"), "sampling_requests")?.[0],
      "a queued sampling request",
    );
    assert.match(JSON.stringify(sampling.messages), /queued prompt/);
    // Receiver tasks live on the upstream connection: the session's own, or the shared one's, which also holds earlier tests' (docs/adr/0010).
    const shared = TEST_SHARING === "shared";
    const receivers = (await store.listBySession(shared ? "shared:everything" : p.sessionId)).filter(
      (r) => r.kind === "receiver" && (!shared || r.status === "working"),
    );
    assert.equal(receivers.length, 2, "both requests are receiver tasks while they wait");
    assert.ok(
      receivers.every((r) => r.status === "working"),
      "receiver tasks start working (the spec's initial status)",
    );
    const r1 = await call(meta, "respond_to_elicitation", { request_id: elicitation.requestId, action: "accept", content: { name: "Queued Ann" } });
    assert.notEqual(r1.isError, true, text(r1));
    const r2 = await call(meta, "respond_to_sampling", { request_id: sampling.requestId, text: "sampled via the queue" });
    assert.notEqual(r2.isError, true, text(r2));
    const e = answered((await elicitCall) as CallToolResult);
    assert.match(e, /\[COMPLETED\]/);
    assert.match(e, /- Name: Queued Ann/);
    const s = answered((await sampleCall) as CallToolResult);
    assert.match(s, /\[COMPLETED\] Async sampling completed!/);
    assert.match(s, /sampled via the queue/);
  });

  test(
    "a declined elicitation completes the upstream call and reports the decline (native and queued)",
    {
      skip:
        TEST_SHARING === "shared" &&
        "calls of two sessions at once on a shared stdio upstream: its elicitations are refused (test/integration/sharing.test.ts)",
    },
    async (t) => {
      const native = await peer(t, "/servers/everything/mcp", { capabilities: ELICIT_AND_SAMPLE, elicit: () => ({ action: "decline" }) });
      const queued = await peer(t, "/servers/everything/mcp");
      const meta = await attachMeta(t, queued);
      const nativeCall = native.client.callTool({ name: "trigger-elicitation-request-async", arguments: {} }, undefined, LONG);
      const queuedCall = queued.client.callTool({ name: "trigger-elicitation-request-async", arguments: {} }, undefined, LONG);
      const pending = await waitFor(
        async () => block<Array<{ requestId: string }>>(await call(meta, "get_elicitations"), "elicitations")?.[0],
        "a queued elicitation",
      );
      const r = await call(meta, "respond_to_elicitation", { request_id: pending.requestId, action: "decline" });
      assert.notEqual(r.isError, true, text(r));
      for (const result of [await nativeCall, await queuedCall]) {
        assert.match(answered(result as CallToolResult), /\[DECLINED\] User declined/);
      }
    },
  );
});

describe("emulation: a plain tools/call of a task-only tool", AT_ONCE, () => {
  test("blocks until the final result and sends progress keep-alives", async (t) => {
    const p = await peer(t, "/servers/everything/mcp");
    const progress: unknown[] = [];
    const [result, expected] = await Promise.all([
      p.client.callTool({ name: RESEARCH, arguments: { topic: "python" } }, undefined, { ...LONG, onprogress: (n) => void progress.push(n) }),
      directReport("python"),
    ]);
    assert.equal(text(result as CallToolResult), expected);
    assert.equal(result._meta?.[RELATED_TASK_META_KEY], undefined, "a plain call's result names no task");
    assert.ok(progress.length >= 1, "at least one progress notification");
    assert.equal(p.notifications("notifications/progress").length, progress.length);
    assert.deepEqual(await p.client.experimental.tasks.listTasks(undefined, LONG), { tasks: [] }, "no task was created for the client");
  });

  test("an elicitation during an emulated call reaches the client without any task id", async (t) => {
    const p = await peer(t, "/all/mcp", {
      capabilities: ELICIT_AND_SAMPLE,
      elicit: () => ({ action: "accept", content: { interpretation: "snake" } }),
    });
    const result = (await p.client.callTool(
      { name: `everything__${RESEARCH}`, arguments: { topic: "python", ambiguous: true } },
      undefined,
      LONG,
    )) as CallToolResult;
    assert.match(text(result), /^# Research Report: python \(snake\)/);
    assert.equal(p.elicitations.length, 1);
    assert.equal(p.elicitations[0]?._meta?.[RELATED_TASK_META_KEY], undefined);
    assert.deepEqual(p.taskIdsSeen(), []);
  });
});

describe("meta face: execute_tool on a task-only tool", () => {
  test("waits for the report, or promotes it to a task whose result is the report", async (t) => {
    const meta = await connectClient(gw.url, { name: "meta" });
    t.after(() => meta.close());
    await waitConnected(meta, "everything");
    await drainEvents(meta);
    const expected = await directReport("python");
    const waited = await call(meta, "execute_tool", { server: "everything", tool: RESEARCH, args: { topic: "python" }, timeout_ms: 60_000 });
    assert.notEqual(waited.isError, true, text(waited));
    assert.ok(
      waited.content.some((c) => c.type === "text" && c.text === expected),
      text(waited),
    );

    const promoted = await call(meta, "execute_tool", { server: "everything", tool: RESEARCH, args: { topic: "python" }, timeout_ms: 0 });
    assert.notEqual(promoted.isError, true, text(promoted));
    const proxy = block<{ task_id: string; status: string }>(promoted, "proxy_task");
    assert.ok(proxy, text(promoted));
    assert.equal(proxy.status, "working");
    const final = await call(meta, "get_task_result", { task_id: proxy.task_id, timeout_ms: 60_000 });
    assert.notEqual(final.isError, true, text(final));
    assert.ok(
      final.content.some((c) => c.type === "text" && c.text === expected),
      text(final),
    );
  });
});

describe("errors", () => {
  test("tasks/get and tasks/result of an unknown id, tasks/cancel of a completed task", async (t) => {
    const p = await peer(t, "/servers/everything/mcp");
    for (const attempt of [() => getTask(p.client, "01UNKNOWNTASK0000000000000"), () => taskResult(p.client, "nope")]) {
      const err = await rpcError(attempt()); // one at a time, as in the isolation case
      assert.equal(err.code, ErrorCode.InvalidParams);
      assert.match(err.message, /not found/i);
    }
    const task = await startTask(p.client, "echo", { message: "done soon" });
    await pollTask(p.client, task.taskId, isTerminalTask, "terminal");
    const err = await rpcError(p.client.experimental.tasks.cancelTask(task.taskId, LONG));
    assert.equal(err.code, ErrorCode.InvalidParams);
    assert.match(err.message, /terminal/);
    assert.equal((await getTask(p.client, task.taskId)).status, "completed");
  });

  test("a task-augmented call of a tool of an unknown server (/all) is an error", async (t) => {
    const p = await peer(t, "/all/mcp");
    const err = await rpcError(startTask(p.client, "nowhere__echo", { message: "x" }));
    assert.equal(err.code, ErrorCode.InvalidParams);
    assert.deepEqual((await p.client.experimental.tasks.listTasks(undefined, LONG)).tasks, []);
  });

  test("a task-augmented call of an unknown tool is an error, not a task (regression)", async (t) => {
    for (const [path, name] of [
      ["/servers/everything/mcp", "no-such-tool"],
      ["/all/mcp", "everything__no-such-tool"],
    ] as const) {
      const p = await peer(t, path);
      const err = await rpcError(startTask(p.client, name, {}));
      assert.equal(err.code, ErrorCode.InvalidParams, `${path}: ${err.message}`);
      assert.deepEqual((await p.client.experimental.tasks.listTasks(undefined, LONG)).tasks, [], `${path}: no task was created`);
    }
  });
});
