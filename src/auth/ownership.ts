/**
 * Who may use what a principal owns — a session, a runtime-added server
 * (docs/adr/0018, "Ownership"; docs/adr/0015): its owner (issuer and subject)
 * compared with the caller. What was made with no authentication on has no
 * owner: it is usable by a caller without authentication (the gateway still
 * runs without any) or with the static token (the operator, who ran the
 * gateway before authentication was on), never by an OAuth principal, which
 * finds it unknown like any other's.
 */
import { STATIC_ISSUER, type Principal } from "./principal.js";

/** An owner as the store keeps it. */
export interface Owner {
  readonly issuer: string;
  readonly subject: string;
}

/** Whether `caller` may use (resume, attach to, send requests to; see, call) what `owner` made. */
export function mayUseOwned(owner: Owner | undefined, caller: Principal | undefined): boolean {
  if (owner === undefined) return caller === undefined || caller.issuer === STATIC_ISSUER;
  return caller !== undefined && caller.issuer === owner.issuer && caller.subject === owner.subject;
}
