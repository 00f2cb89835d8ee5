/** The "sessions" batch of test/batches/batches.json in one process (test/helpers/batch.ts). */
import { runBatch } from "../helpers/batch.js";

runBatch("sessions");
