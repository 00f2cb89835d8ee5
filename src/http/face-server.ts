/** What an MCP endpoint connects a session's transport to: the face's MCP server (both eras' paths build one per session). */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

export interface FaceServer {
  connect(transport: Transport): Promise<void>;
  close(): Promise<void>;
}
