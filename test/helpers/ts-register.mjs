/**
 * `node --import ./test/helpers/ts-register.mjs --test file.ts`: the repository's
 * TypeScript through test/helpers/ts-hooks.mjs (what `npm test` uses instead of tsx),
 * with stack traces mapped back to the .ts lines as tsx does. In the loading thread
 * where Node has module.registerHooks (22.15+), else on Node's hooks thread.
 */
import * as module from "node:module";

process.setSourceMapsEnabled(true);
if (typeof module.registerHooks === "function") module.registerHooks(await import("./ts-hooks.mjs"));
else module.register("./ts-hooks.mjs", import.meta.url);
