/**
 * The `emceepee://diagrams` resource (seed 000 "New Resource: Mermaid
 * Diagrams"): static mermaid sources of the gateway's state machines.
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
] as const;

export function diagramsContents() {
  return {
    contents: [{ uri: DIAGRAMS_URI, mimeType: "application/json", text: JSON.stringify({ diagrams: DIAGRAMS }) }],
  };
}
