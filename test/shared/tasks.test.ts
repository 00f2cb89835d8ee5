/** test/integration/tasks.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
const done = leaveOut({
  errors: "refused by the gateway before any upstream is used",
});
await import("../integration/tasks.test.js");
done();
