/** test/integration/meta-shapes.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
await leaveOut(
  {
    "a client written against the documented alias names (list_servers, add_server, list_tasks, get_task)":
      "the gateway's own reply shapes (routing through a shared upstream: meta-async, meta-core, tasks)",
    "await_activity sinceEventId (the cursor, design MF-18)": "the session's event log, kept by the gateway",
    "gateway-wide event cap (gateway.events.maxTotal)": "the gateway's event store; the calls that fill it are plain calls",
  },
  () => import("../integration/meta-shapes.test.js"),
);
