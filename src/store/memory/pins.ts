/** Pinned tool definitions in a Map keyed by (server, tool) (see PinStore). */
import type { PinnedDefinition, PinRecord, PinStore } from "../contracts.js";
import { accepted, byServerTool, matchesQuery, withPending } from "../pin-update.js";
import { jsonCopy } from "../policy.js";
import type { MemoryGuard } from "./guard.js";

const keyOf = (server: string, tool: string) => JSON.stringify([server, tool]);

export class MemoryPinStore implements PinStore {
  private readonly pins = new Map<string, PinRecord>();

  constructor(private readonly guard: MemoryGuard) {}

  async get(server: string, tool: string): Promise<PinRecord | undefined> {
    this.guard.check();
    const r = this.pins.get(keyOf(server, tool));
    return r && jsonCopy(r);
  }

  async list(query: { server?: string; quarantined?: boolean } = {}): Promise<PinRecord[]> {
    this.guard.check();
    return [...this.pins.values()]
      .filter((r) => matchesQuery(r, query))
      .sort(byServerTool)
      .map(jsonCopy);
  }

  async pinIfAbsent(server: string, tool: string, first: PinnedDefinition): Promise<PinRecord> {
    this.guard.check();
    const key = keyOf(server, tool);
    let r = this.pins.get(key);
    if (!r) this.pins.set(key, (r = { server, tool, pinned: jsonCopy(first) }));
    return jsonCopy(r);
  }

  async quarantine(server: string, tool: string, seen: PinnedDefinition): Promise<boolean> {
    this.guard.check();
    const key = keyOf(server, tool);
    const r = this.pins.get(key);
    const next = r && withPending(r, jsonCopy(seen));
    if (!next) return false;
    this.pins.set(key, next);
    return true;
  }

  async accept(server: string, tool: string, digest: string, by: string, at: number): Promise<PinRecord | undefined> {
    this.guard.check();
    const key = keyOf(server, tool);
    const r = this.pins.get(key);
    const next = r && accepted(r, digest, by, at);
    if (!next) return undefined;
    this.pins.set(key, next);
    return jsonCopy(next);
  }
}
