/** errorMessage() names what fetch() (undici) hides behind "fetch failed": a refused connection, an unknown host. */
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { errorMessage } from "../../src/errors.js";

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test("a refused connection says so, with the address and port", async () => {
  const port = await closedPort();
  const err = await fetch(`http://127.0.0.1:${port}/mcp`).then(
    () => assert.fail("nothing listens there"),
    (e: unknown) => e,
  );
  assert.equal((err as Error).message, "fetch failed");
  assert.match(errorMessage(err), new RegExp(`^connection refused at 127\\.0\\.0\\.1:${port} `));
});

test("an unknown host names the host", async () => {
  const err = await fetch("http://no-such-host.invalid/mcp").then(
    () => assert.fail("the .invalid TLD never resolves"),
    (e: unknown) => e,
  );
  assert.match(errorMessage(err), /^host not found: no-such-host\.invalid/);
});

test("other errors keep their message", () => {
  assert.equal(errorMessage(new Error("boom")), "boom");
  assert.equal(errorMessage("text"), "text");
});
