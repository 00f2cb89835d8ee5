/** The "protocol" batch of test/batches/batches.json in one process (test/helpers/batch.ts): the 2026-07-28 era files served in process, and the tasks files. */
import { runBatch } from "../helpers/batch.js";

runBatch("protocol");
