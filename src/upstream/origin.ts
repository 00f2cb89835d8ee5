/**
 * CallOrigin: what caused an upstream call — the downstream request whose
 * stream should carry what the upstream asks of the client meanwhile, and the
 * gateway task that owns the call once there is one. Callers hand one to the
 * request surface (requests.ts); the connection's attribution
 * (src/mcp/request-attribution.ts) gives it back for each server→client
 * request it can place, and the session's routing decides from it where the
 * request goes (routing.ts) and marks the owning task `input_required` while
 * the request waits for the client (ADR 0002 §8).
 *
 * Mutable on purpose: a meta-face call is promoted to a task while it runs,
 * and a task-augmented call's gateway task exists only once the upstream has
 * answered; attachTask() then applies to what already waits.
 */
import type { RequestId } from "@modelcontextprotocol/sdk/types.js";

export interface CallOriginInit {
  /** The downstream connection `requestId` belongs to (a face's SDK Server): ids are only unique per connection. */
  downstream?: object | undefined;
  /** The downstream request the call serves, while it is being answered. */
  requestId?: RequestId | undefined;
}

export class CallOrigin {
  readonly downstream: object | undefined;
  readonly requestId: RequestId | undefined;
  private waiting = 0;
  private task: { id: string; report: (waiting: boolean) => void } | undefined;

  constructor(init: CallOriginInit = {}) {
    this.downstream = init.downstream;
    this.requestId = init.requestId;
  }

  /** The gateway task that owns the call, once there is one. */
  get taskId(): string | undefined {
    return this.task?.id;
  }

  /** Server→client requests of this call waiting for the client now. */
  get waitingForClient(): number {
    return this.waiting;
  }

  /**
   * From now on the call belongs to gateway task `taskId`; `report(true)` when
   * a request of the call starts waiting for the client (at once if one
   * already does), `report(false)` when none waits any more.
   */
  attachTask(taskId: string, report: (waiting: boolean) => void): void {
    this.task = { id: taskId, report };
    if (this.waiting > 0) report(true);
  }

  /** A server→client request of this call waits for the client until the returned function is called (once). */
  awaitClient(): () => void {
    if (++this.waiting === 1) this.task?.report(true);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.waiting === 0) this.task?.report(false);
    };
  }
}
