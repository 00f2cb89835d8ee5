/** test/integration/tasks-edge.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
await leaveOut(
  {
    "an ended task lives at least its TTL; each session keeps a bounded number of ended tasks": "the gateway's own task records (echo tasks)",
    "an upstream task that fails: tasks/get says failed, tasks/result returns the upstream's own result under the gateway's id":
      "the failed status and result are data on the way tasks.test's research task takes through a shared upstream (its shared pass)",
    "gateway-owned tasks: an isError result is a failed task (result kept); progress goes on under the client's token":
      "the gateway's own task status from the result; progress through a shared upstream: transparent's /servers progress test (shared pass) and 'progress of an upstream task…' below (shared)",
  },
  () => import("../integration/tasks-edge.test.js"),
);
