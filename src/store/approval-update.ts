/** The compare-and-set every ApprovalStore backend applies (ApprovalStore.update): one rule, three stores. */
import type { ApprovalRecord, ApprovalStore } from "./contracts.js";

type Update = Parameters<ApprovalStore["update"]>;

/** The record after the update, or undefined when the condition does not hold. */
export function applyApprovalUpdate(current: ApprovalRecord, patch: Update[1], condition: Update[2]): ApprovalRecord | undefined {
  if (!condition.ifState.includes(current.state)) return undefined;
  if (condition.ifUnclaimed && current.claimedAt !== undefined) return undefined;
  const next: ApprovalRecord = { ...current };
  for (const [k, v] of Object.entries(patch)) if (v !== undefined) (next as unknown as Record<string, unknown>)[k] = v;
  for (const k of condition.unset ?? []) delete next[k];
  return next;
}

export const byCreation = (a: ApprovalRecord, b: ApprovalRecord): number => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
