/** test/integration/meta-replies.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
await leaveOut(
  {
    "structured meta-tools declare an outputSchema; structuredContent is the JSON reply plus the envelope, valid for the SDK client":
      "the gateway's own reply shapes",
    "a promotion names the action its server's pending requests need: respond_to_sampling, respond_to_elicitation":
      "the gateway's reply text; sampling and elicitation through a shared upstream: meta-async's shared pass",
    "list_tools: filter and pages": "filters and pages the tool list the gateway holds",
    "access log": "the gateway's log lines (and a spawned CLI that the sharing mode does not reach)",
  },
  () => import("../integration/meta-replies.test.js"),
);
