/** test/integration/transparent-lists.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
await leaveOut(
  {
    "the server-everything tools not exercised elsewhere (env, resource links and references, gzip) equal direct":
      "plain calls take the shared view's one request path, which transparent's 'tool results equal direct' runs shared",
    "a client that never sends initialized does not hold an upstream's elicitation: after a bounded wait it is queued and can be answered":
      "the wait is the session's own (its client never sent initialized); an elicitation through a shared upstream: transparent's elicitation tests (shared pass)",
  },
  () => import("../integration/transparent-lists.test.js"),
);
