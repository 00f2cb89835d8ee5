/**
 * subscribe_resource, unsubscribe_resource (design MF-23): the upstream's
 * `resources/subscribe` for this session; each `notifications/resources/updated`
 * it then sends becomes a notification event that wakes await_activity (and
 * shows in get_notifications). A subscription keeps the connection from idle
 * release and is set again on a reconnect or resumed session (ADR 0007).
 */
import { z } from "zod";
import { ErrorCodes, GatewayError } from "../../../errors.js";
import type { UpstreamHandle } from "../../../upstream/handle.js";
import { defineTool, json } from "../define.js";

const input = {
  server: z.string().describe("Server name, as in list_servers"),
  uri: z.string().min(1).max(8192).describe("Resource URI, as in list_resources"),
};

function assertCanSubscribe(conn: UpstreamHandle, server: string): void {
  if (conn.capabilities?.resources?.subscribe) return;
  throw new GatewayError(
    ErrorCodes.BAD_ARGUMENTS,
    `server '${server}' does not offer resource subscriptions (no resources.subscribe capability); poll with read_resource instead`,
  );
}

export const subscribeResource = defineTool({
  name: "subscribe_resource",
  title: "Subscribe to a resource",
  description:
    "Subscribe to updates of one resource. Each time the server says it changed, a notification event (method notifications/resources/updated, with its uri) wakes await_activity and shows in the next response's events; read it again with read_resource. Stop with unsubscribe_resource.",
  input,
  async run({ session }, { server, uri }) {
    const conn = await session.connection(server);
    assertCanSubscribe(conn, server);
    await conn.subscribeResource(uri);
    return json({ subscribed: true, server, uri }, `Subscribed to ${uri} on '${server}'.`);
  },
});

export const unsubscribeResource = defineTool({
  name: "unsubscribe_resource",
  title: "Unsubscribe from a resource",
  description: "Stop the updates of a resource subscribed with subscribe_resource.",
  input,
  async run({ session }, { server, uri }) {
    const conn = await session.connection(server);
    assertCanSubscribe(conn, server);
    await conn.unsubscribeResource(uri);
    return json({ subscribed: false, server, uri }, `Unsubscribed from ${uri} on '${server}'.`);
  },
});
