/**
 * Traces configured by the standard OTEL_* environment alone reach an OTLP
 * collector: `emceepee serve` as a child with OTEL_EXPORTER_OTLP_ENDPOINT
 * pointing at a small OTLP/HTTP sink in the test, over http/json (parsed
 * here) and over http/protobuf (the default). SIGTERM flushes what is
 * batched. The span names and the resource come from the collector's view.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { call, connectClient, ROOT } from "../helpers/gateway.js";
import { startCliServe, waitExit, type RunningCli } from "../helpers/core-extra.js";

interface Received {
  contentType: string;
  body: Buffer;
}

/** An OTLP/HTTP trace sink: records every POST /v1/traces and answers 200. */
async function startSink(): Promise<{ url: string; received: Received[]; close(): Promise<void> }> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/v1/traces") received.push({ contentType: String(req.headers["content-type"]), body: Buffer.concat(chunks) });
      res.writeHead(200, { "Content-Type": req.headers["content-type"] ?? "application/json" });
      res.end(req.headers["content-type"]?.includes("json") ? "{}" : undefined);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, received, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

const children: RunningCli[] = [];
after(() => {
  for (const c of children) c.child.kill("SIGKILL");
});

async function tracedRun(protocol: string, sinkUrl: string): Promise<void> {
  const env = {
    OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl,
    OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    OTEL_SERVICE_NAME: "emceepee-under-test",
    OTEL_BSP_SCHEDULE_DELAY: "100",
  };
  const served = await startCliServe(ROOT, ["--port", "0", "--no-upstream-check", "--store", "memory", "--log-level", "silent"], 120_000, env);
  children.push(served);
  const client = await connectClient(served.url);
  const r = await call(client, "list_servers");
  assert.notEqual(r.isError, true);
  await client.close();
  served.child.kill("SIGTERM");
  assert.equal((await waitExit(served.child, 60_000)).code, 0, served.stderr());
}

describe("OTLP export from the OTEL_* environment", () => {
  test("http/json: the collector gets the gateway's spans under OTEL_SERVICE_NAME", async () => {
    const sink = await startSink();
    try {
      await tracedRun("http/json", sink.url);
      assert.ok(sink.received.length > 0, "at least one export reached the collector (SIGTERM flushed the batch)");
      assert.ok(sink.received.every((r) => r.contentType.includes("application/json")));
      const spans = sink.received.flatMap((r) => {
        const body = JSON.parse(r.body.toString("utf8")) as {
          resourceSpans: Array<{
            resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> };
            scopeSpans: Array<{ spans: Array<{ name: string }> }>;
          }>;
        };
        return body.resourceSpans.map((rs) => ({
          service: rs.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue,
          names: rs.scopeSpans.flatMap((s) => s.spans.map((sp) => sp.name)),
        }));
      });
      assert.ok(
        spans.every((s) => s.service === "emceepee-under-test"),
        JSON.stringify(spans),
      );
      const names = spans.flatMap((s) => s.names);
      assert.ok(names.includes("tools/call list_servers"), `span names: ${names.join(", ")}`);
      assert.ok(names.includes("initialize"), `span names: ${names.join(", ")}`);
    } finally {
      await sink.close();
    }
  });

  test("http/protobuf (the default protocol): the collector gets protobuf", async () => {
    const sink = await startSink();
    try {
      await tracedRun("http/protobuf", sink.url);
      assert.ok(sink.received.length > 0);
      assert.ok(sink.received.every((r) => r.contentType.includes("application/x-protobuf")));
      assert.ok(
        sink.received.some((r) => r.body.includes(Buffer.from("tools/call list_servers"))),
        "the span name is in the protobuf payload",
      );
    } finally {
      await sink.close();
    }
  });
});
