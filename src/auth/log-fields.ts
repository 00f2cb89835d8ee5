/**
 * Who a request is served for, on its log lines: `principalHash` (and, with
 * `auth.logSubject`, `principalSubject` and the `email` claim as
 * `principalEmail`) on every line logged while it is handled, through
 * withLogFields (src/logging.ts). Never the token. ADR 0018, decision 12.
 */
import type { IncomingMessage } from "node:http";
import { withLogFields } from "../logging.js";
import { principalOf, type Principal } from "./principal.js";

export interface PrincipalLogOptions {
  /** `auth.logSubject`: the subject (and `email` claim) beside the hash. */
  logSubject: boolean;
}

/** The fields of every log line written while `principal`'s request is handled. */
export function principalLogFields(principal: Principal, o: PrincipalLogOptions): Record<string, string> {
  if (!o.logSubject) return { principalHash: principal.hash };
  const email = principal.claims.email;
  return {
    principalHash: principal.hash,
    principalSubject: principal.subject,
    ...(typeof email === "string" && email !== "" ? { principalEmail: email } : {}),
  };
}

/** Runs `fn` with the log fields of the principal attached to `req` (src/auth/principal.ts), or as it is when there is none. */
export function withPrincipalLogFields<T>(req: IncomingMessage, o: PrincipalLogOptions, fn: () => T): T {
  const principal = principalOf(req);
  return principal ? withLogFields(principalLogFields(principal, o), fn) : fn();
}
