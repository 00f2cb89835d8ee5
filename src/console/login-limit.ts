/**
 * Failed console logins per client address (docs/adr/0012-console.md,
 * "Login rate limit"): after `maxFailures` wrong tokens within `windowMs`, an
 * address gets 429 with Retry-After — for the right token too — until its
 * window ends. The address is the TCP peer's: behind a reverse proxy every
 * client shares the proxy's. Memory is bounded: at most `maxClients`
 * addresses are tracked; expired ones are pruned first, then the oldest.
 * index.ts counts OpenID Connect login starts per address with one too
 * (console.oidc.maxLoginStartsPerAddress).
 */
import type { Clock } from "../clock.js";

export interface LoginLimitOptions {
  clock: Clock;
  /** Wrong tokens an address may send per window. */
  maxFailures: number;
  windowMs: number;
  /** Addresses tracked at most. @default 10000 */
  maxClients?: number;
}

interface Window {
  start: number;
  failures: number;
}

export class LoginLimiter {
  private readonly windows = new Map<string, Window>();
  private readonly maxClients: number;

  constructor(private readonly o: LoginLimitOptions) {
    this.maxClients = o.maxClients ?? 10_000;
  }

  /** Milliseconds until `address` may try again, or undefined when it may now. */
  blockedFor(address: string): number | undefined {
    const w = this.current(address);
    if (!w || w.failures < this.o.maxFailures) return undefined;
    return w.start + this.o.windowMs - this.o.clock.now();
  }

  failed(address: string): void {
    const w = this.current(address);
    if (w) {
      w.failures++;
      return;
    }
    if (this.windows.size >= this.maxClients) this.prune();
    this.windows.set(address, { start: this.o.clock.now(), failures: 1 });
  }

  succeeded(address: string): void {
    this.windows.delete(address);
  }

  /** Addresses tracked now (for tests and the bound). */
  get size(): number {
    return this.windows.size;
  }

  /** The address's window while it lasts (an ended one is forgotten). */
  private current(address: string): Window | undefined {
    const w = this.windows.get(address);
    if (w && this.o.clock.now() >= w.start + this.o.windowMs) {
      this.windows.delete(address);
      return undefined;
    }
    return w;
  }

  /**
   * Makes room for one more. Map order is insertion order, which is the order
   * windows started: ended ones are at the front, and the oldest goes next.
   */
  private prune(): void {
    for (const [address, w] of this.windows) {
      if (this.windows.size < this.maxClients && this.o.clock.now() < w.start + this.o.windowMs) break;
      this.windows.delete(address);
    }
  }
}
