/** The "lifecycle" batch of test/batches/batches.json in one process (test/helpers/batch.ts): files whose gateways are CLI processes they start, restart and end themselves (docs/adr/0051). */
import { runBatch } from "../helpers/batch.js";

runBatch("lifecycle");
