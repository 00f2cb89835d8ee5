/** One session served over stdin/stdout with the chosen face (`emceepee --stdio`); it lives as long as stdin. */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createMetaServer } from "../faces/meta/server.js";
import { createTransparentServer } from "../faces/transparent/server.js";
import type { Observability } from "../observability/observability.js";
import type { Session } from "../session/session.js";
import type { GatewayContext } from "../session/gateway-context.js";

export type StdioFace = { kind: "meta" } | { kind: "all" } | { kind: "server"; server: string } | { kind: "virtual"; name: string };

export interface StdioOptions {
  face?: StdioFace;
  stdin?: NodeJS.ReadableStream;
  stdout?: NodeJS.WritableStream;
}

export async function serveStdioSession(
  context: GatewayContext,
  observability: Observability,
  { face = { kind: "meta" }, stdin = process.stdin, stdout = process.stdout }: StdioOptions,
): Promise<{ session: Session; close(): Promise<void> }> {
  const { sessions, settings } = context;
  // One session per process: never expired as one-shot.
  const session = sessions.create({ connect: face.kind === "meta" && settings.upstream.eagerConnect, oneShot: false });
  observability.faces.opened(session.id, "stdio", "pipe");
  const server =
    face.kind === "meta"
      ? createMetaServer({ session, gateway: context })
      : await createTransparentServer({
          session,
          gateway: context,
          target: face.kind === "all" ? { kind: "all", separator: settings.transparent.separator } : face,
        });
  const transport = new StdioServerTransport(stdin as never, stdout as never);
  await server.connect(transport);
  observability.tapServer(transport, session, "pipe");
  return { session, close: () => server.close() };
}
