/** test/integration/transparent.test.ts with every upstream shared (EMCEEPEE_TEST_SHARING, docs/adr/0010), less the tests named here; see test/README.md. */
import { leaveOut } from "./leave-out.js";

process.env.EMCEEPEE_TEST_SHARING = "shared";
await leaveOut(
  {
    "MCP Inspector CLI (a real client) through the transparent face":
      "the same requests as the SDK client's tests below, which run shared; the Inspector checks the client side",
    "JSON-RPC errors reach the client with the upstream's code, data and message text":
      "the same requests as the verbatim test, which runs shared and asserts all of this (the whole error equal)",
    "resources: list, templates and read equal direct":
      "plain requests take the shared view's one request path (upstream/sharing/shared-view.ts), which 'tool results equal direct' runs shared",
    "prompts list/get and completions equal direct":
      "plain requests take the shared view's one request path (upstream/sharing/shared-view.ts), which 'tool results equal direct' runs shared",
    "tool calls are routed by prefix and return what direct returns": "the /all face's prefix routing, the gateway's own; the calls: /servers' tests",
    "resources/read is routed back to the owning upstream (static URI and template)":
      "the /all face's prefix routing, the gateway's own; the reads: /servers' tests",
    "prompts are prefixed and resolve back": "the /all face's prefix routing, the gateway's own",
    "progress: every notification arrives, under the client's own token (3 runs)":
      "progress through a shared upstream is routed by the call's origin whichever face sent it: the /servers progress test runs shared",
    "Last-Event-ID: a dropped SSE stream resumes without losing messages":
      "the replay is the session's own event store and its downstream streams; what reaches them through a shared upstream (progress under the call's token, log messages on the GET stream) is the /servers progress and logging tests' (shared pass)",
  },
  () => import("../integration/transparent.test.js"),
);
