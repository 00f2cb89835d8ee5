/**
 * `node --import ./test/helpers/ts-register.mjs --test file.ts`: the repository's
 * TypeScript through test/helpers/ts-hooks.mjs (what `npm test` uses instead of tsx),
 * with stack traces mapped back to the .ts lines as tsx does.
 */
import { register } from "node:module";

process.setSourceMapsEnabled(true);
register("./ts-hooks.mjs", import.meta.url);
