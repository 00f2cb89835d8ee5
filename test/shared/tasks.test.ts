/** test/integration/tasks.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
await leaveOut(
  {
    errors: "refused by the gateway before any upstream is used",
    "capabilities and tools/list advertise tasks for every tool":
      "the gateway's own capabilities and taskSupport on each listed tool; a shared upstream's tool list: transparent's 'tools/list equals direct (execution aside)' (shared pass)",
    "TTL expiry ends the task (failed, says it expired), cancels the upstream task, then the gateway's sweep deletes the record":
      "the gateway's TTL timer and sweep; the upstream cancel the expiry sends (the task's abort, src/tasks/native.ts) is the one 'tasks/cancel cancels the upstream task too' sends shared",
    "echo as a task: a gateway task whose result equals the direct one":
      "a gateway-owned task over a plain call; plain calls through a shared upstream: transparent's 'tool results equal direct' (shared pass)",
    "waits for the report, or promotes it to a task whose result is the report":
      "the meta face's wait and promotion are the gateway's; the upstream task it drives (runUpstreamTaskToEnd) is the emulation tests' (shared)",
  },
  () => import("../integration/tasks.test.js"),
);
