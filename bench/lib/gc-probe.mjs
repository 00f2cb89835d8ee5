/**
 * Preloaded into the benchmarked gateway process (`--import bench/lib/gc-probe.mjs`,
 * with `--expose-gc`). It answers IPC messages and changes nothing else in the
 * gateway: `{ type: "gc" }` runs a full GC and answers with
 * process.memoryUsage(), so RSS readings taken right after are not inflated by
 * garbage; `{ type: "mem" }` answers with process.memoryUsage() without a GC;
 * `{ type: "snapshot", path }` runs a full GC and writes a heap snapshot there.
 * Plain JavaScript: it loads without tsx, beside the bundled CLI too. When the
 * bench goes away without stopping the gateway, the gateway shuts down.
 */
import v8 from "node:v8";

/** @typedef {{ type?: unknown; id?: unknown; path?: unknown }} ProbeRequest */

if (process.send) {
  process.on("message", (/** @type {ProbeRequest} */ m) => {
    /** @type {(() => void) | undefined} */
    const gc = /** @type {{ gc?: () => void }} */ (globalThis).gc;
    if (m?.type === "mem") {
      process.send?.({ type: "mem", id: m.id, memory: process.memoryUsage() });
      return;
    }
    if (m?.type === "snapshot" && typeof m.path === "string") {
      gc?.();
      gc?.();
      const file = v8.writeHeapSnapshot(m.path);
      process.send?.({ type: "snapshot", id: m.id, path: file, memory: process.memoryUsage() });
      return;
    }
    if (m?.type !== "gc") return;
    gc?.();
    gc?.();
    setImmediate(() => process.send?.({ type: "gc", id: m.id, gc: gc !== undefined, memory: process.memoryUsage() }));
  });
  // The IPC channel must not keep the gateway alive on its own.
  process.channel?.unref();
  // The bench is gone (killed, crashed) without stopping it: shut down as on SIGTERM, which ends its upstreams too.
  process.once("disconnect", () => process.kill(process.pid, "SIGTERM"));
}
