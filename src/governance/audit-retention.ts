/**
 * The retention sweep of governance decision records (issue 24): every
 * governance.audit.sweepMs it deletes records older than maxAgeMs and the
 * oldest beyond maxRecords (DecisionStore.prune), so a quiet gateway — no new
 * decision to trim on append — still forgets what it should. Reads the audit
 * block in force at each sweep (a SIGHUP reload applies at the next one).
 * start() arms the timer, close() clears it and waits for a sweep under way.
 */
import type { Clock } from "../clock.js";
import type { GovernanceSettings } from "../config/governance.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../logging.js";
import type { Store } from "../store/contracts.js";

export interface AuditRetentionDeps {
  clock: Clock;
  logger: Logger;
  store: () => Store;
  /** The audit settings in force. */
  audit: () => GovernanceSettings["audit"];
}

export class AuditRetention {
  private timer: ReturnType<Clock["setTimeout"]> | undefined;
  private sweeping: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly deps: AuditRetentionDeps) {}

  start(): void {
    if (this.closed || this.timer !== undefined) return;
    this.arm();
  }

  /** One sweep now; a store failure is logged, never thrown. Returns how many records it deleted. */
  async sweep(): Promise<number> {
    const { maxAgeMs, maxRecords } = this.deps.audit();
    try {
      const deleted = await this.deps.store().decisions.prune({ now: this.deps.clock.now(), maxAgeMs, maxRecords });
      if (deleted > 0) this.deps.logger.info({ deleted, maxAgeMs, maxRecords }, "audit_retention_swept");
      return deleted;
    } catch (err) {
      this.deps.logger.error({ err: errorMessage(err) }, "audit_retention_failed");
      return 0;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.deps.clock.clearTimeout(this.timer);
    this.timer = undefined;
    await this.sweeping;
  }

  private arm(): void {
    this.timer = this.deps.clock.setTimeout(() => {
      this.sweeping = this.sweep().then(() => {
        if (!this.closed) this.arm();
      });
    }, this.deps.audit().sweepMs);
  }
}
