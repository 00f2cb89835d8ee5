/**
 * The `emceepee://diagrams` resource (design MF-16): static mermaid sources
 * of the gateway's state machines. The five of the meta face come first, in
 * a fixed order; then the other machines the gateway has, each derived from
 * the code it names:
 * MCP tasks as clients see them (src/mcp/task-object.ts, src/tasks/native.ts),
 * receiver tasks (src/upstream/receiver-tasks.ts) and upstream reconnection
 * (src/session/reconnection.ts).
 */
export const DIAGRAMS_URI = "emceepee://diagrams";

export const DIAGRAMS = [
  {
    name: "proxy_task_states",
    description: "State machine for proxy tasks created when tool calls exceed timeout",
    mermaid:
      "stateDiagram-v2\n    [*] --> working : execute_tool timeout expires\n\n    working --> completed : Final server returns result\n    working --> failed : Final server returns error\n    working --> failed : Final server disconnects\n    working --> cancelled : Client calls cancel_task\n    working --> expired : TTL exceeded\n\n    completed --> [*] : Cleaned up after retention period\n    failed --> [*] : Cleaned up after retention period\n    cancelled --> [*] : Cleaned up after retention period\n    expired --> [*] : Cleaned up after retention period",
  },
  {
    name: "pending_elicitation_states",
    description: "State machine for elicitation requests from final servers awaiting client response",
    mermaid:
      "stateDiagram-v2\n    [*] --> pending : Final server sends elicitation/create\n\n    pending --> accepted : Client calls respond_to_elicitation(action: accept)\n    pending --> declined : Client calls respond_to_elicitation(action: decline)\n    pending --> cancelled : Client calls respond_to_elicitation(action: cancel)\n    pending --> expired : Timeout reached (default 10 min)\n    pending --> rejected : Final server disconnects\n\n    accepted --> [*] : Response sent to final server\n    declined --> [*] : Response sent to final server\n    cancelled --> [*] : Response sent to final server\n    expired --> [*] : Error sent to final server\n    rejected --> [*] : Error (server gone)\n\n    note right of pending\n        Elicitation blocks the final server's operation\n        until client responds. The client sees it via\n        await_activity or get_elicitations.\n    end note",
  },
  {
    name: "pending_sampling_states",
    description: "State machine for sampling requests from final servers awaiting LLM completion",
    mermaid:
      "stateDiagram-v2\n    [*] --> pending : Final server sends sampling/createMessage\n\n    pending --> completed : Client calls respond_to_sampling\n    pending --> expired : Timeout reached\n    pending --> rejected : Final server disconnects\n\n    completed --> [*] : Response sent to final server\n    expired --> [*] : Error sent to final server\n    rejected --> [*] : Error (server gone)",
  },
  {
    name: "tool_call_lifecycle",
    description: "Flow showing how tool calls are promoted to tasks on timeout",
    mermaid:
      "stateDiagram-v2\n    [*] --> in_flight : execute_tool called\n\n    in_flight --> returned_result : Completes within timeout\n    in_flight --> promoted_to_task : Timeout expires\n\n    returned_result --> [*] : Result returned to client (no task created)\n\n    promoted_to_task --> task_working : Task created\n\n    state task_working {\n        [*] --> waiting\n        waiting --> completed : Result received\n        waiting --> failed : Error received\n    }",
  },
  {
    name: "entity_relationships",
    description: "Overview of all proxy entities and how they interact",
    mermaid:
      'flowchart TB\n    subgraph "Original Client"\n        OC[Client Tools]\n    end\n\n    subgraph "MCP Proxy"\n        Tasks[(Proxy Tasks)]\n        Elicit[(Pending Elicitations)]\n        Sampling[(Pending Sampling)]\n        Notif[(Buffered Notifications)]\n        Logs[(Buffered Logs)]\n    end\n\n    subgraph "Final Servers"\n        FS1[Server 1]\n        FS2[Server 2]\n    end\n\n    OC -->|execute_tool| Tasks\n    OC -->|respond_to_elicitation| Elicit\n    OC -->|respond_to_sampling| Sampling\n    OC -->|await_activity| Tasks & Elicit & Sampling & Notif & Logs\n\n    FS1 -->|elicitation/create| Elicit\n    FS1 -->|sampling/createMessage| Sampling\n    FS1 -->|notifications/*| Notif\n    FS1 -->|logging/message| Logs\n    FS2 -->|elicitation/create| Elicit\n    FS2 -->|sampling/createMessage| Sampling',
  },
  {
    name: "mcp_task_states",
    description:
      "MCP tasks (2025-11-25) as clients of the transparent faces see them through tasks/get, tasks/list and notifications/tasks/status: gateway-owned tasks and tasks mapped onto upstream tasks",
    mermaid: [
      "stateDiagram-v2",
      "    [*] --> working : task-augmented tools/call (CreateTaskResult at once)",
      "",
      "    working --> input_required : the upstream task waits for input (seen on tasks/get or its status notification)",
      "    input_required --> working : the client answers the elicitation that tasks/result delivered",
      "",
      "    working --> completed : tool result (tasks/result returns it)",
      "    working --> failed : tool result with isError, or a JSON-RPC error",
      "    working --> failed : upstream disconnects (state unknown)",
      "    working --> failed : TTL expires (statusMessage says the TTL ran out)",
      "    working --> cancelled : tasks/cancel (upstream task cancelled too)",
      "    input_required --> failed : upstream disconnects or TTL expires",
      "    input_required --> cancelled : tasks/cancel",
      "",
      "    completed --> [*] : deleted after completedRetentionMs, never before its TTL is over",
      "    failed --> [*] : deleted after completedRetentionMs, never before its TTL is over",
      "    cancelled --> [*] : deleted after completedRetentionMs, never before its TTL is over",
      "",
      "    note right of failed",
      "        The meta face's `expired` is `failed` here:",
      "        MCP has no expired status.",
      "    end note",
    ].join("\n"),
  },
  {
    name: "receiver_task_states",
    description:
      "Receiver tasks: an upstream sends a task-augmented sampling/createMessage or elicitation/create; the gateway (its client) answers with a task at once and serves the upstream's tasks/* while the request waits for the gateway's own client",
    mermaid: [
      "stateDiagram-v2",
      "    [*] --> working : upstream sends a task-augmented request (refused beyond maxTasksPerSession live tasks)",
      "",
      "    working --> completed : the client answers (natively, or respond_to_* from the pending queue)",
      "    working --> failed : the answer fails (rejected, expired in the pending queue, client error)",
      "    working --> cancelled : upstream sends tasks/cancel (the forwarded request is withdrawn)",
      "",
      "    working --> [*] : TTL expires (forwarded request withdrawn, task deleted)",
      "    working --> [*] : connection to the upstream closes or the session ends",
      "    completed --> [*] : deleted when its TTL is over (tasks/result served until then)",
      "    failed --> [*] : deleted when its TTL is over",
      "    cancelled --> [*] : deleted when its TTL is over",
    ].join("\n"),
  },
  {
    name: "upstream_connection_states",
    description: "One session's connection to one upstream, with background reconnection after a drop (capped exponential backoff with jitter)",
    mermaid: [
      "stateDiagram-v2",
      "    [*] --> connecting : session start or first use",
      "    connecting --> connected : initialize succeeds (server_connected)",
      "    connecting --> error : connect fails (retried on next use)",
      "    error --> connecting : next use",
      "",
      "    connected --> disconnected : transport closes (server_disconnected: working tasks fail, pending requests rejected)",
      "    disconnected --> reconnecting : after backoff delay n (logged as server_reconnecting when scheduled)",
      "    reconnecting --> connected : reconnect succeeds: restart detected, lists refreshed, list_changed, server_reconnected",
      "    reconnecting --> disconnected : attempt fails (server_reconnect_failed), next delay",
      "    disconnected --> gave_up : upstream.reconnect.maxAttempts reached",
      "    gave_up --> connecting : next use",
      "    disconnected --> connecting : next use (before the timer)",
      "",
      "    connected --> [*] : remove_server, add_server update or session end",
      "",
      "    note right of reconnecting",
      "        Only connecting is retried,",
      "        never a tool call.",
      "    end note",
    ].join("\n"),
  },
] as const;

export function diagramsContents() {
  return {
    contents: [{ uri: DIAGRAMS_URI, mimeType: "application/json", text: JSON.stringify({ diagrams: DIAGRAMS }) }],
  };
}
