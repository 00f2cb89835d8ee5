// Preloaded (NODE_OPTIONS=--import) into the `async-context` child of bench/observability.bench.ts:
// enters an AsyncLocalStorage once, which makes Node 20 track the async context of every promise
// from then on — what tracing's context propagation costs, without any span.
import { AsyncLocalStorage } from "node:async_hooks";

if (process.argv.includes("serve")) new AsyncLocalStorage().enterWith({ on: true });
