/**
 * Visibility of resources, resource templates and prompts (issue 24,
 * docs/adr/0022 §visibility): what every face filters its lists with, and the
 * refusal of a hidden one read or got by name — the gateway's own not-found
 * error (EMCP_UNKNOWN_RESOURCE / EMCP_UNKNOWN_PROMPT), so that a hidden item
 * cannot be told from a missing one. Without governance everything is visible.
 */
import type { Principal } from "../auth/principal.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import type { Governance } from "./governance.js";

export interface Viewer {
  governance?: Governance | undefined;
  principal?: Principal | undefined;
}

/** The resources the viewer sees (by URI). */
export function visibleResources<T extends { uri: string }>(v: Viewer, server: string, items: readonly T[]): T[] {
  const g = v.governance;
  return g ? items.filter((r) => g.itemVisible(v.principal, server, "resource", r.uri)) : [...items];
}

/** The resource templates the viewer sees (by uriTemplate). */
export function visibleTemplates<T extends { uriTemplate: string }>(v: Viewer, server: string, items: readonly T[]): T[] {
  const g = v.governance;
  return g ? items.filter((r) => g.itemVisible(v.principal, server, "resource", r.uriTemplate)) : [...items];
}

/** The prompts the viewer sees (by their upstream name). */
export function visiblePrompts<T extends { name: string }>(v: Viewer, server: string, items: readonly T[]): T[] {
  const g = v.governance;
  return g ? items.filter((p) => g.itemVisible(v.principal, server, "prompt", p.name)) : [...items];
}

/** Refuses reading a hidden resource as if no upstream had it. */
export function assertResourceVisible(v: Viewer, server: string, uri: string): void {
  if (v.governance && !v.governance.itemVisible(v.principal, server, "resource", uri)) throw unknownResource(uri);
}

/** Refuses getting a hidden prompt as if the server had none of that name. */
export function assertPromptVisible(v: Viewer, server: string, name: string, exposed = name): void {
  if (v.governance && !v.governance.itemVisible(v.principal, server, "prompt", name)) throw unknownPrompt(exposed);
}

/** The not-found error of a resource no upstream lists (the /all face's, also used for a hidden one everywhere). */
export function unknownResource(uri: string): GatewayError {
  return new GatewayError(ErrorCodes.UNKNOWN_RESOURCE, `no upstream lists a resource or template matching '${uri}'`, { details: { uri } });
}

export function unknownPrompt(name: string): GatewayError {
  return new GatewayError(ErrorCodes.UNKNOWN_PROMPT, `unknown prompt '${name}'; call list_prompts (prompts/list) to see the prompts you can use`, {
    details: { prompt: name },
  });
}
