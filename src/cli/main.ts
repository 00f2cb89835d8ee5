#!/usr/bin/env node
/**
 * The `emceepee` executable (package.json `bin`): runs the CLI (program.ts)
 * on this process's arguments. Nothing else lives here, so importing the
 * commands (tests, scripts/start.mjs) never parses argv by accident.
 */
import { run } from "./program.js";

void run(process.argv);
