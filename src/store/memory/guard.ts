/** The memory backend's open/closed state, shared by its stores (every method checks it first). */
import { storeClosed } from "../policy.js";

export class MemoryGuard {
  private closed = false;

  get isClosed(): boolean {
    return this.closed;
  }

  check(): void {
    if (this.closed) throw storeClosed("memory");
  }

  close(): void {
    this.closed = true;
  }
}
