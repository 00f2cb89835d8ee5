/**
 * The meta-tools' `outputSchema`s: what programs find in `structuredContent`
 * (the same value as the reply's JSON text block, plus the session envelope).
 * In one place so the structured replies can be read side by side; the
 * registrar (server.ts) attaches them by tool name.
 *
 * Every object is loose (`additionalProperties` allowed): the schemas name the
 * fields the gateway writes and require the ones always present, and a newer
 * gateway may add fields without breaking a client that validates (the SDK
 * client checks `structuredContent` against these). Tools that return an
 * upstream's own payload have no schema: execute_tool (the tool's result
 * verbatim; a promotion still carries `structuredContent`), get_task_result,
 * get_prompt and read_resource.
 */
import { z } from "zod";

const str = z.string();
const row = (shape: z.ZodRawShape = {}) => z.looseObject(shape);

/** A stored event as replies show it (envelope.ts formatEvent); `count` > 1 when identical list_changed notifications were folded. */
const event = row({ id: str, type: str, server: str, created_at: str, createdAt: str, data: z.record(str, z.unknown()), count: z.number().int().optional() });

const elicitationSummary = row({ requestId: str, server: str, mode: str, message: str });

/**
 * What withEnvelope adds to every structured reply (await_activity delivers its own), named by type
 * only: an event's fields are await_activity's `events[].events[]`, a waiting request's get_elicitations'
 * and get_sampling_requests' rows. Each SDK client compiles every outputSchema at each tools/list (Ajv);
 * the full envelope in all 27 made that compile ×3-4 (ADR 0052), its outer shape still ≈×2 (ADR 0052, amended in session 22).
 */
const envelope = {
  events_since_last_response: z.array(z.unknown()).optional(),
  pending_client_action: z.looseObject({}).optional(),
};

/** task-view.ts: the project's names and their camelCase aliases (design MF-19). */
const task = row({ task_id: str, status: str, server: str, tool: str, taskId: str, toolName: str });

/** One row per server of a fan-out list (fanout.ts): its items, or the error that server gave. */
const perServer = (key: string) => row({ server: str, [key]: z.array(row()).optional(), error: str.optional() });

const output = (shape: z.ZodRawShape) => z.looseObject({ ...shape, ...envelope });

/** A timer (tools/timers.ts): the public emceepee's camelCase names. */
const timerShape = {
  id: str,
  timerId: str,
  message: str,
  durationMs: z.number().int(),
  interval: z.boolean(),
  status: z.enum(["active", "expired", "deleted"]),
  fireCount: z.number().int(),
  createdAt: str,
  expiresAt: str,
};

export const META_OUTPUT_SCHEMAS: Readonly<Record<string, z.ZodObject>> = {
  add_server: output({
    added: str,
    outcome: z.enum(["added", "updated", "unchanged"]),
    status: str,
    tools: z.array(row({ name: str })),
    tool_names: z.array(str),
  }),
  remove_server: output({ removed: str, sessionsDisconnected: z.number().int() }),
  list_servers: output({ servers: z.array(row({ name: str, status: str, connected: z.boolean() })) }),
  list_tools: output({
    servers: z.array(perServer("tools")),
    total_tools: z.number().int(),
    returned: z.number().int(),
    next_cursor: str.optional(),
  }),
  list_resources: output({ servers: z.array(perServer("resources")) }),
  list_resource_templates: output({ servers: z.array(perServer("resourceTemplates")) }),
  list_prompts: output({ servers: z.array(perServer("prompts")) }),
  get_notifications: output({ notifications: z.array(row({ server: str, method: str })) }),
  get_logs: output({ logs: z.array(row({ server: str })) }),
  get_elicitations: output({ elicitations: z.array(row({ requestId: str, server: str, mode: str })) }),
  respond_to_elicitation: output({ success: z.boolean(), requestId: str, action: str }),
  get_sampling_requests: output({ sampling_requests: z.array(row({ requestId: str, server: str })) }),
  respond_to_sampling: output({ success: z.boolean(), requestId: str, rejected: z.boolean().optional() }),
  list_tasks: output({ tasks: z.array(task) }),
  get_task: output({ task, pending_elicitations_for_server: z.array(elicitationSummary), pending_elicitations: z.array(row({ requestId: str, server: str })) }),
  cancel_task: output({ success: z.boolean(), message: str }),
  await_activity: output({
    triggers: z.array(row({ type: str })),
    events: z.array(row({ server: str, events: z.array(event) })),
    pending_server: z.array(row({ server: str, working_tasks: z.array(row({ taskId: str, toolName: str, status: str })) })),
    pending_client: row({ elicitations: z.array(row({ requestId: str, server: str })), sampling_requests: z.array(row({ requestId: str, server: str })) }),
    lastEventId: str.optional(),
    cursor: row({ sinceEventId: str, found: z.boolean() }).optional(),
  }),
  search_tools: output({
    query: str,
    results: z.array(row({ server: str, name: str, summary: str, score: z.number(), input_schema: row().optional() })),
    total_matches: z.number().int(),
    indexed: z.array(row({ server: str, tools: z.number().int() })),
    not_indexed: z.array(row({ server: str, status: z.enum(["connecting", "error"]), error: str.optional() })),
  }),
  reconnect_server: output({ name: str, previous_status: str, status: str, shared: z.boolean() }),
  subscribe_resource: output({ subscribed: z.boolean(), server: str, uri: str }),
  unsubscribe_resource: output({ subscribed: z.boolean(), server: str, uri: str }),
  cancel_elicitation_request: output({ success: z.boolean(), requestId: str, action: str }),
  cancel_sampling_request: output({ success: z.boolean(), requestId: str, rejected: z.boolean() }),
  set_timer: output(timerShape),
  list_timers: output({ timers: z.array(row(timerShape)) }),
  get_timer: output(timerShape),
  delete_timer: output({ deleted: z.boolean(), timer: row(timerShape) }),
};
