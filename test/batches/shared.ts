/**
 * The "shared" batch of test/batches/batches.json in one process (test/helpers/batch.ts): the shared-upstream pass,
 * every wrapper of test/shared/. Its filter module first (it must wrap node:test before any file imports it), and
 * the sharing mode for the whole process (test/helpers/gateway.ts reads it once).
 */
import "../shared/leave-out.js";
import { runBatch } from "../helpers/batch.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
runBatch("shared");
