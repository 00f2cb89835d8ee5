/**
 * Who a served request is for, in traces and metrics (issue 22, ADR 0018
 * decision 12): its server span carries `enduser.pseudo.id`, the
 * principal's stable 16-hex hash (src/auth/principal.ts), and `enduser.id`
 * (the subject) only with `auth.logSubject`; the hash labels
 * emceepee_principal_requests_total when `metrics.principals` is above 0
 * (metrics.ts). Log lines: src/auth/log-fields.ts. Never the token.
 */
import type { Attributes } from "@opentelemetry/api";
import type { PrincipalLogOptions } from "../auth/log-fields.js";
import type { Principal } from "../auth/principal.js";

/** The attributes of `principal`'s request span. */
export function principalSpanAttributes(principal: Principal, o: PrincipalLogOptions): Attributes {
  return o.logSubject ? { "enduser.pseudo.id": principal.hash, "enduser.id": principal.subject } : { "enduser.pseudo.id": principal.hash };
}
