/**
 * A stdio upstream that exits at start often breaks the pipe (EPIPE on the
 * gateway's first write) before its stderr has been read. The connection's
 * failure reason must still quote what the process said, not only that the
 * pipe broke. The transport here fails its first write and speaks on stderr
 * afterwards, the order a loaded machine produces (seen in CI).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { silentLogger } from "../../src/logging.js";
import { UpstreamConnection } from "../../src/upstream/connection.js";
import { unusedHandlers } from "../helpers/upstream-handlers.js";

function brokenPipeTransport(stderr: PassThrough): Transport {
  const transport: Transport = {
    start: () => Promise.resolve(),
    send: () => {
      // The write fails first; the process's last words and its exit come after.
      setTimeout(() => {
        stderr.write("crashy: fatal: missing API key\n");
        stderr.end();
        transport.onclose?.();
      }, 200);
      const err = Object.assign(new Error("write EPIPE"), { code: "EPIPE" });
      return Promise.reject(new Error(`cannot write to upstream 'crashy': ${err.message}`, { cause: err }));
    },
    close: () => Promise.resolve(),
  };
  return transport;
}

test("a process that breaks the pipe before its stderr is read: the reason still quotes its stderr", async () => {
  const stderr = new PassThrough();
  const connection = new UpstreamConnection({
    name: "crashy",
    config: { command: "unused: the transport is a named behaviour", args: [] },
    handlers: unusedHandlers(),
    transportFactory: () => ({ transport: brokenPipeTransport(stderr), stderr }),
    clientInfo: { name: "test", version: "1" },
    connectTimeoutMs: 30_000,
    requestTimeoutMs: 30_000,
    logger: silentLogger,
  });
  try {
    const err = await connection.connect().then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    assert.ok(err, "the connect fails");
    assert.match(err.message, /EPIPE/);
    assert.match(err.message, /missing API key/, "the stderr the process wrote after the broken pipe is in the reason");
  } finally {
    await connection.close();
  }
});
