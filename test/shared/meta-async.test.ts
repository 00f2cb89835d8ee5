/** test/integration/meta-async.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
const done = leaveOut({
  "exactly once: an event shown in one response never appears in a later one": "the session's event delivery, kept by the gateway",
  "await_activity with nothing pending times out with triggers [timeout] and an empty events array": "no upstream involved",
  "await_activity returns at once (trigger immediate) when events are undelivered": "the session's event delivery, kept by the gateway",
  "concurrent await_activity waiters all wake on one event, which is delivered once": "the session's event delivery, kept by the gateway",
  "emceepee://diagrams resource": "the gateway's own resource",
});
await import("../integration/meta-async.test.js");
done();
