/** test/integration/meta-core.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
const done = leaveOut({
  "wrong argument types to a meta-tool give an isError result that names the field": "refused before any upstream is used",
  "an unknown meta-tool name is rejected, naming the tool": "refused before any upstream is used",
  "execute_tool on an unknown server gives EMCP_UNKNOWN_SERVER listing the known servers": "refused before any upstream is used",
  "add_server of a config-file server's name with another config gives EMCP_FORBIDDEN and leaves it alone": "refused before any upstream is used",
  "add_server without command or url gives EMCP_BAD_ARGUMENTS": "refused before any upstream is used",
  "remove_server of an unknown server gives EMCP_UNKNOWN_SERVER": "refused before any upstream is used",
  "raw HTTP on /mcp: malformed requests and session lifecycle": "a gateway without upstreams",
});
await import("../integration/meta-core.test.js");
done();
