/** Whether callers must prove who they are (the static token, or OAuth with issuers): the "beyond loopback without a token" checks ask this. */
import type { GatewaySettings } from "../config/schema.js";

export function callersAuthenticated(settings: { token?: string | undefined; auth?: Pick<GatewaySettings["auth"], "oauth"> | undefined }): boolean {
  return settings.token !== undefined || (settings.auth?.oauth.issuers.length ?? 0) > 0;
}
