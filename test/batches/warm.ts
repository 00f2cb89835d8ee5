/** The "warm" batch of test/batches/batches.json in one process (test/helpers/batch.ts): the warm pool's files and two that spawn the CLI and end it themselves (docs/adr/0054). */
import { runBatch } from "../helpers/batch.js";

runBatch("warm");
