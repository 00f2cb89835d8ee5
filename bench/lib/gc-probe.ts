/**
 * Preloaded into the benchmarked gateway process (`--import bench/lib/gc-probe.ts`,
 * with `--expose-gc`): on an IPC message `{ type: "gc" }` it runs a full GC and
 * answers with process.memoryUsage(), so RSS readings taken right after are not
 * inflated by garbage. It changes nothing else in the gateway.
 */
type GcRequest = { type?: unknown; id?: unknown };

if (process.send) {
  process.on("message", (m: GcRequest) => {
    if (m?.type !== "gc") return;
    const gc = (globalThis as { gc?: () => void }).gc;
    gc?.();
    gc?.();
    setImmediate(() => process.send?.({ type: "gc", id: m.id, gc: gc !== undefined, memory: process.memoryUsage() }));
  });
  // The IPC channel must not keep the gateway alive on its own.
  process.channel?.unref();
}
