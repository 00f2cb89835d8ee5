/** test/integration/reliability.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
await leaveOut(
  {
    "oversized tool arguments are refused with a clear error on both faces": "refused before any upstream is used",
    "an idle session expires even while its SSE stream is open; the stream is closed": "a gateway without upstreams",
    "200 sessions opened and closed leave no sessions, bindings, stored tasks, events or requests, or timers behind": "a gateway without upstreams",
    "a hanging upstream times out with a reason; a garbage-speaking one fails; other servers keep serving":
      "connect failures are the connection's own code in both modes; a shared upstream that fails to start: meta-core's 'an upstream in the config that exits at start' (shared pass)",
  },
  () => import("../integration/reliability.test.js"),
);
