/**
 * reconnect_server (design MF-28), the public emceepee's name and argument:
 * drop this session's connection to a server (any state: connected,
 * failing, waiting for a backoff retry) and connect afresh now. Work that
 * depended on the old connection ends as at any drop (UP-5): working tasks
 * fail and pending requests are rejected, "state unknown". A shared upstream
 * (docs/adr/0010) is not torn down for the others: the session leaves it and
 * joins again, which reconnects it only if it is down.
 */
import { z } from "zod";
import { defineTool, iso, json } from "../define.js";

export const reconnectServer = defineTool({
  name: "reconnect_server",
  title: "Reconnect a server",
  description:
    "Drop this session's connection to a server and connect again now (cancels a pending retry). Use it when a server seems stuck or after fixing its setup. Calls still running on it fail (their outcome is unknown) and its pending elicitations/sampling requests are rejected.",
  input: { name: z.string().min(1).describe("Server name, as in list_servers") },
  async run({ session, gateway }, { name }) {
    gateway.registry.require(name, session);
    const before = session.view(name).status;
    await session.disconnect(name, `reconnect_server: the client asked to reconnect '${name}'`);
    const conn = await session.connection(name);
    return json(
      {
        name,
        previous_status: before,
        status: conn.status,
        connected_at: iso(conn.connectedAt),
        ...(conn.serverInfo ? { serverInfo: conn.serverInfo } : {}),
        shared: conn.shared,
      },
      `Reconnected to server '${name}'.`,
    );
  },
});
