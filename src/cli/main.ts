#!/usr/bin/env node
/**
 * The `emceepee` executable (package.json `bin`): runs the CLI (program.ts)
 * on this process's arguments. Nothing else lives here, so importing the
 * commands (tests, scripts/start.mjs) never parses argv by accident.
 * On Node >= 22.1 it first turns on Node's on-disk compile cache (as tsc
 * does; NODE_DISABLE_COMPILE_CACHE=1 turns it off): later starts skip
 * compiling the ~600 modules a gateway loads (docs/adr/0039).
 */
import module from "node:module";

(module as { enableCompileCache?: () => unknown }).enableCompileCache?.();
// After the cache is on: a static import would be compiled before this line runs.
const { run } = await import("./program.js");
void run(process.argv);
