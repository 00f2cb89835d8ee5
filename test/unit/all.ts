/**
 * Every test/unit/*.test.ts in one process: `npm test` runs this file instead
 * of ~55 processes that each load tsx, the SDK and zod again (about 1 s of CPU
 * apiece). Each file still runs alone (`node --import tsx --test test/unit/x.test.ts`);
 * here their top-level tests run one after another, in file order. See test/README.md.
 */
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const DIR = path.dirname(fileURLToPath(import.meta.url));

for (const file of readdirSync(DIR)
  .filter((f) => f.endsWith(".test.ts"))
  .sort()) {
  await import(pathToFileURL(path.join(DIR, file)).href);
}
