/**
 * What this build is: the package version, the SQLite store schema version
 * it migrates files to (src/store/sqlite/migrations.ts), and the Node.js it
 * runs on. `emceepee --version` prints it and `emceepee_build_info` exposes
 * it; importing it loads no dependency (docs/adr/0017-lazy-start.md).
 */
import { createRequire } from "node:module";
import { LATEST_VERSION } from "../store/sqlite/migrations.js";

export interface BuildInfo {
  /** package.json `version`. */
  version: string;
  /** The SQLite schema version (`PRAGMA user_version`) this build migrates a store file to. */
  schema: number;
  /** The running Node.js version, without the "v". */
  node: string;
}

let cached: BuildInfo | undefined;

/** The build of this process (read once). */
export function buildInfo(): BuildInfo {
  // ../../package.json from src/observability/ and from dist/observability/ alike.
  cached ??= {
    version: (createRequire(import.meta.url)("../../package.json") as { version: string }).version,
    schema: LATEST_VERSION,
    node: process.versions.node,
  };
  return cached;
}

/** The `--version` line, e.g. `emceepee 0.1.0 (store schema 9, Node.js 20.19.0)`. */
export function versionLine(info: BuildInfo = buildInfo()): string {
  return `emceepee ${info.version} (store schema ${info.schema}, Node.js ${info.node})`;
}
