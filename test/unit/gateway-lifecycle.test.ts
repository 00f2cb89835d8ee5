/**
 * The composition root's lifecycle (src/server/gateway.ts, parts.ts): close()
 * walks the parts in reverse start order, a failing part is logged and the
 * rest still close, and listen()/close() are idempotent. In process, on port
 * 0, with no upstream (none is needed to start, listen and close).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { pino } from "pino";
import { parseConfig } from "../../src/config/load.js";
import { createGateway } from "../../src/server/gateway.js";
import { Parts } from "../../src/server/parts.js";

/** A pino logger at debug that keeps its lines, parsed. */
function capture(): { logger: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split("\n")) if (line.trim() !== "") lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: "debug" }, stream), lines };
}

function gatewayConfig(extra: Record<string, unknown> = {}) {
  return parseConfig({ mcpServers: {}, gateway: { port: 0, logLevel: "silent", ...extra } });
}

test("Parts closes in reverse order of adding; a failing part is logged and the rest still close; close() twice is one close", async () => {
  const { logger, lines } = capture();
  const parts = new Parts(logger);
  const closed: string[] = [];
  parts.add("first", () => void closed.push("first"));
  parts.add("second", () => {
    throw new Error("second broke");
  });
  parts.add("third", async () => {
    await Promise.resolve();
    closed.push("third");
  });
  assert.deepEqual(parts.closeOrder, ["third", "second", "first"]);
  const one = parts.close();
  const two = parts.close();
  assert.equal(one, two, "the same promise");
  await one;
  assert.deepEqual(closed, ["third", "first"], "each part closed once, the one after the failure too");
  const failed = lines.filter((l) => l.msg === "part_close_failed");
  assert.deepEqual(
    failed.map((l) => [l.part, l.err]),
    [["second", "second broke"]],
  );
  assert.throws(
    () => parts.add("late", () => undefined),
    (err: Error & { code?: string }) => err.code === "EMCP_CLOSED" && /added after close/.test(err.message),
  );
});

test("the gateway closes its parts in reverse start order: checks first, the listener after the upstreams, the store and tracing last", async () => {
  const { logger, lines } = capture();
  const gateway = createGateway(gatewayConfig({ console: { enabled: true } }), { logger });
  await gateway.listen();
  await gateway.close();
  const closed = lines.filter((l) => l.msg === "part_closed").map((l) => l.part);
  assert.deepEqual(closed, gateway.closeOrder, "every part closed, in closeOrder");
  const at = (name: string) => closed.indexOf(name);
  for (const name of ["checker", "start", "sweeps", "console", "endpoints", "sessions", "http", "store", "observability"]) assert.notEqual(at(name), -1, name);
  assert.equal(at("checker"), 0);
  assert.ok(at("sweeps") < at("console") && at("console") < at("endpoints"), "sweeps stop and the live console ends before the endpoints close");
  assert.ok(at("endpoints") < at("sessions") && at("sessions") < at("http"), "the listener stays open (probes answer 503) until the sessions are gone");
  assert.ok(at("http") < at("store") && at("store") < at("observability"), "the store closes after everything that may write, tracing last");
  const events = lines.map((l) => l.msg);
  assert.ok(events.indexOf("registry_shutdown_start") < events.indexOf("part_closed"));
  assert.equal(events.at(-1), "gateway_closed");
});

test("listen() twice returns the same promise and one listener; close() twice is one shutdown; listen() after close() is refused", async () => {
  const { logger, lines } = capture();
  const gateway = createGateway(gatewayConfig(), { logger });
  const first = gateway.listen();
  const second = gateway.listen();
  assert.equal(first, second, "the same promise");
  const { url } = await first;
  const ready = await fetch(new URL("/readyz", url));
  assert.equal(ready.status, 200);
  assert.equal(gateway.state, "ready");

  const a = gateway.close();
  const b = gateway.close();
  assert.equal(a, b, "the same promise");
  await a;
  await gateway.close();
  assert.equal(lines.filter((l) => l.msg === "registry_shutdown_start").length, 1, "one shutdown");
  assert.equal(lines.filter((l) => l.msg === "part_closed" && l.part === "http").length, 1, "the listener closed once");
  await assert.rejects(fetch(new URL("/readyz", url)), "the listener is closed");

  const late = createGateway(gatewayConfig(), { logger });
  await late.close();
  await assert.rejects(late.listen(), (err: Error & { code?: string }) => err.code === "EMCP_CLOSED");
});
