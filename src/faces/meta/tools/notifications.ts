/** get_notifications, get_logs: the per-server buffers, cleared on read. */
import { z } from "zod";
import { defineTool, iso, json } from "../define.js";

export const getNotifications = defineTool({
  name: "get_notifications",
  title: "Get buffered notifications",
  description: "Return and clear the notifications upstream servers sent this session (one server or all).",
  input: { server: z.string().optional().describe("Server name; omit for all") },
  async run({ session }, { server }) {
    const notifications = session.buffers.takeNotifications(server).map((n) => ({ ...n, timestamp: iso(n.timestamp) }));
    return json({ notifications });
  },
});

export const getLogs = defineTool({
  name: "get_logs",
  title: "Get buffered logs",
  description:
    "Return and clear the log messages upstream servers sent this session (MCP logging messages and stdio servers' stderr). Logs never trigger await_activity.",
  input: { server: z.string().optional().describe("Server name; omit for all") },
  async run({ session }, { server }) {
    const logs = session.buffers.takeLogs(server).map((l) => ({ ...l, timestamp: iso(l.timestamp) }));
    return json({ logs });
  },
});
