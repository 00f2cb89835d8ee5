/** Approvals in a Map by id (see ApprovalStore). */
import { applyApprovalUpdate, byCreation } from "../approval-update.js";
import type { ApprovalRecord, ApprovalState, ApprovalStore } from "../contracts.js";
import { jsonCopy } from "../policy.js";
import type { MemoryGuard } from "./guard.js";

export class MemoryApprovalStore implements ApprovalStore {
  private readonly records = new Map<string, ApprovalRecord>();

  constructor(private readonly guard: MemoryGuard) {}

  async create(record: ApprovalRecord): Promise<void> {
    this.guard.check();
    this.records.set(record.id, jsonCopy(record));
  }

  async get(id: string): Promise<ApprovalRecord | undefined> {
    this.guard.check();
    const r = this.records.get(id);
    return r && jsonCopy(r);
  }

  async list(query: { states?: readonly ApprovalState[]; limit?: number } = {}): Promise<ApprovalRecord[]> {
    this.guard.check();
    return [...this.records.values()]
      .filter((r) => query.states === undefined || query.states.includes(r.state))
      .sort(byCreation)
      .slice(0, query.limit ?? Infinity)
      .map(jsonCopy);
  }

  async update(
    id: string,
    patch: Parameters<ApprovalStore["update"]>[1],
    condition: Parameters<ApprovalStore["update"]>[2],
  ): Promise<ApprovalRecord | undefined> {
    this.guard.check();
    const current = this.records.get(id);
    const next = current && applyApprovalUpdate(current, patch, condition);
    if (!next) return undefined;
    this.records.set(id, next);
    return jsonCopy(next);
  }

  async deleteEndedBefore(before: number): Promise<number> {
    this.guard.check();
    let n = 0;
    for (const [id, r] of this.records)
      if (r.state !== "pending" && r.createdAt < before) {
        this.records.delete(id);
        n++;
      }
    return n;
  }
}
