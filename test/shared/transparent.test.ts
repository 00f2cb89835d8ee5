/** test/integration/transparent.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
const done = leaveOut({
  "MCP Inspector CLI (a real client) through the transparent face":
    "the same requests as the SDK client's tests below, which run shared; the Inspector checks the client side",
});
await import("../integration/transparent.test.js");
done();
