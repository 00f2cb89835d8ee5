/** test/integration/meta-async.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
await leaveOut(
  {
    "a short timeout_ms promotes the call; await_activity wakes on task_completed; get_task_result gives the real result":
      "the gateway's promotion and task record; a call promoted through a shared upstream and its result: the form elicitation accept test below",
    "a long timeout_ms returns the result directly and creates no task": "a plain call: meta-core's execute_tool-equals-direct test runs shared",
    "form elicitation: decline completes the task with server-everything's decline text":
      "the action is data on the answer's way back, the path accept takes (the form elicitation accept test below)",
    "form elicitation: cancel completes the task with server-everything's cancel text":
      "the action is data on the answer's way back, the path accept takes (the form elicitation accept test below)",
    "pending_client_action is in every response while an elicitation is pending and gone after the answer":
      "the gateway's envelope; a pending elicitation through a shared upstream: the form elicitation tests below",
    "pending_client_action is also in the error response to a meta-tool call with invalid arguments":
      "the gateway's envelope on a call refused before any upstream is used",
    "exactly once: an event shown in one response never appears in a later one": "the session's event delivery, kept by the gateway",
    "await_activity with nothing pending times out with triggers [timeout] and an empty events array": "no upstream involved",
    "await_activity returns at once (trigger immediate) when events are undelivered": "the session's event delivery, kept by the gateway",
    "concurrent await_activity waiters all wake on one event, which is delivered once": "the session's event delivery, kept by the gateway",
    "emceepee://diagrams resource": "the gateway's own resource",
    "accept with content that does not match the schema is an error and the elicitation stays answerable":
      "the answers refused are the gateway's own check against the elicitation's schema, before anything reaches the upstream; the accept that follows is the form elicitation accept test's (shared)",
    "URL elicitation (trigger-url-elicitation): mode url with the url visible; accept completes it":
      "a URL elicitation through a shared upstream and its answer: transparent's URL-mode elicitation test (shared pass); the meta face's listing of it is the gateway's, its answer's way back the form elicitation accept test's (shared)",
  },
  () => import("../integration/meta-async.test.js"),
);
