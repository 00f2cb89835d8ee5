/**
 * Limits per principal (docs/design/limits.md LM-8, ADR 0018 "Limits per
 * principal"): how many sessions, and working tasks plus calls that may become
 * one, one OAuth principal holds on this replica, beside the global limits.
 * Counted from the live sessions (an index by principal), never stored: per
 * replica. Sessions of no principal (authentication off) and the static
 * token's "operator" are not limited here.
 */
import { STATIC_ISSUER, type Principal } from "../auth/principal.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import type { Logger } from "../logging.js";

/** Which per-principal limit refused something (the metric's `limit` label). */
export type PrincipalLimitKind = "sessions" | "tasks";

/** `gateway.sessions.maxPerPrincipal` and `gateway.tasks.maxPerPrincipal`; 0 turns one off. */
export interface PrincipalLimitSettings {
  maxSessions: number;
  maxTasks: number;
}

/** What is counted of a session: who owns it and how many task slots it holds now. */
export interface CountedSession {
  readonly principal: Principal | undefined;
  /** Working tasks plus calls in flight that may become one (TaskManager.load). */
  readonly taskLoad: number;
}

export class PrincipalLimits {
  private readonly byPrincipal = new Map<string, Set<CountedSession>>();
  /** Hears every refusal (the refusals counter; no principal in it). */
  onRefused: ((kind: PrincipalLimitKind) => void) | undefined;

  constructor(
    private readonly settings: PrincipalLimitSettings,
    /** Each refusal is logged at info as `principal_limit_refused`, naming the principal's hash (never who). */
    private readonly logger?: Logger,
  ) {}

  /** Throws EMCP_PRINCIPAL_LIMIT when `principal` already holds maxSessions sessions here. */
  admitSession(principal: Principal | undefined): void {
    const max = this.settings.maxSessions;
    if (!limited(principal) || max === 0) return;
    const held = this.byPrincipal.get(keyOf(principal))?.size ?? 0;
    if (held < max) return;
    this.refuse(
      principal,
      "sessions",
      max,
      held,
      `you already hold ${held} sessions on this gateway and one principal may hold ${max} (gateway.sessions.maxPerPrincipal); close sessions you no longer use (HTTP DELETE with their Mcp-Session-Id) or ask the operator to raise the setting`,
    );
  }

  /**
   * Throws EMCP_PRINCIPAL_LIMIT when the principal of `session` already holds
   * maxTasks working tasks and calls in flight across its sessions here.
   */
  admitTask(session: CountedSession): void {
    const max = this.settings.maxTasks;
    const principal = session.principal;
    if (!limited(principal) || max === 0) return;
    const held = this.taskLoadOf(principal);
    if (held < max) return;
    this.refuse(
      principal,
      "tasks",
      max,
      held,
      `you already have ${held} working tasks and calls in flight across your sessions and one principal may have ${max} (gateway.tasks.maxPerPrincipal); wait for some to finish or cancel them (tasks/cancel, cancel_task), or ask the operator to raise the setting`,
    );
  }

  /** Counts a live session toward its principal (create and resume). */
  add(session: CountedSession): void {
    if (!limited(session.principal)) return;
    const key = keyOf(session.principal);
    let set = this.byPrincipal.get(key);
    if (!set) this.byPrincipal.set(key, (set = new Set()));
    set.add(session);
  }

  /** The session ended. */
  remove(session: CountedSession): void {
    if (!limited(session.principal)) return;
    const key = keyOf(session.principal);
    const set = this.byPrincipal.get(key);
    if (!set?.delete(session)) return;
    if (set.size === 0) this.byPrincipal.delete(key);
  }

  /** Live sessions of `principal` here. */
  sessionsOf(principal: Principal): number {
    return this.byPrincipal.get(keyOf(principal))?.size ?? 0;
  }

  /** Working tasks and calls in flight of `principal`'s live sessions here. */
  taskLoadOf(principal: Principal): number {
    let n = 0;
    for (const s of this.byPrincipal.get(keyOf(principal)) ?? []) n += s.taskLoad;
    return n;
  }

  private refuse(principal: Principal, kind: PrincipalLimitKind, max: number, held: number, message: string): never {
    this.logger?.info({ principalHash: principal.hash, limit: kind, max, held }, "principal_limit_refused");
    this.onRefused?.(kind);
    throw new GatewayError(ErrorCodes.PRINCIPAL_LIMIT, message, { details: { limit: kind, max, held } });
  }
}

/** Whether the per-principal limits apply: a known principal that is not the static token's operator. */
function limited(principal: Principal | undefined): principal is Principal {
  return principal !== undefined && principal.issuer !== STATIC_ISSUER;
}

function keyOf(principal: Principal): string {
  return `${principal.issuer}\0${principal.subject}`;
}
