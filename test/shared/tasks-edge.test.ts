/** test/integration/tasks-edge.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
const done = leaveOut({
  "an ended task lives at least its TTL; each session keeps a bounded number of ended tasks": "the gateway's own task records (echo tasks)",
});
await import("../integration/tasks-edge.test.js");
done();
