/** The "replicas" batch of test/batches/batches.json in one process (test/helpers/batch.ts): replica sets, the stdio face and access logs, each a CLI process its file starts and ends (docs/adr/0051). */
import { runBatch } from "../helpers/batch.js";

runBatch("replicas");
