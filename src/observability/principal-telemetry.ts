/**
 * Who a served request is for, in telemetry (issue 22, ADR 0018): the
 * principal's stable 16-hex hash (src/auth/principal.ts) on the log lines
 * written while it is handled (`principalHash`), on its span
 * (`enduser.pseudo.id`) and, when `metrics.principals` is above 0, as a
 * label of emceepee_principal_requests_total (metrics.ts). The subject and
 * the `email` claim only when the operator sets `auth.logSubject`; the token
 * never.
 */
import type { Attributes } from "@opentelemetry/api";
import type { Principal } from "../auth/principal.js";

export interface PrincipalTelemetryOptions {
  /** `auth.logSubject`: the subject (and `email` claim) beside the hash. */
  logSubject: boolean;
}

/** The fields of every log line written while `principal`'s request is handled. */
export function principalLogFields(principal: Principal, o: PrincipalTelemetryOptions): Record<string, string> {
  if (!o.logSubject) return { principalHash: principal.hash };
  const email = emailOf(principal);
  return { principalHash: principal.hash, principalSubject: principal.subject, ...(email !== undefined ? { principalEmail: email } : {}) };
}

/** The attributes of `principal`'s request span: `enduser.pseudo.id` (the hash); `enduser.id` (the subject) only with logSubject. */
export function principalSpanAttributes(principal: Principal, o: PrincipalTelemetryOptions): Attributes {
  return o.logSubject ? { "enduser.pseudo.id": principal.hash, "enduser.id": principal.subject } : { "enduser.pseudo.id": principal.hash };
}

function emailOf(principal: Principal): string | undefined {
  const email = principal.claims.email;
  return typeof email === "string" && email !== "" ? email : undefined;
}
