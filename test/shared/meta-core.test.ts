/** test/integration/meta-core.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
await leaveOut(
  {
    "wrong argument types to a meta-tool give an isError result that names the field": "refused before any upstream is used",
    "an unknown meta-tool name is rejected, naming the tool": "refused before any upstream is used",
    "execute_tool on an unknown server gives EMCP_UNKNOWN_SERVER listing the known servers": "refused before any upstream is used",
    "add_server of a config-file server's name with another config gives EMCP_FORBIDDEN and leaves it alone": "refused before any upstream is used",
    "add_server without command or url gives EMCP_BAD_ARGUMENTS": "refused before any upstream is used",
    "remove_server of an unknown server gives EMCP_UNKNOWN_SERVER": "refused before any upstream is used",
    "raw HTTP on /mcp: malformed requests and session lifecycle": "a gateway without upstreams",
    "list_servers shows server-everything connected, with the serverInfo it reports":
      "a shared upstream's list_servers row (status, transport, serverInfo): the stdio add/list/call/remove round trip below (shared)",
    "list_tools without a server lists the tools of every server":
      "the gateway's aggregation over servers; a shared upstream's tool list: the list_tools/execute_tool-equals-direct test below (shared)",
    "execute_tool with an unknown tool gives EMCP_UNKNOWN_TOOL naming server and tool":
      "the gateway's own check against the cached tool list, which the list_tools/execute_tool-equals-direct test reads shared",
    "server-everything over Streamable HTTP: add, list, call, remove":
      "a remote server added at runtime, shared: the unreachable-URL test adds, calls and removes the same HTTP server-everything (shared); another session using a runtime server: the stdio round trip (shared)",
  },
  () => import("../integration/meta-core.test.js"),
);
