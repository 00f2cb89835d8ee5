/**
 * Pinned tool definitions, rug-pull protection (docs/adr/0029): the first
 * definition of each upstream tool seen is pinned in the store (shared by
 * replicas); a later different one is quarantined until an admin accepts it
 * on the console. `hide`: a quarantined tool is absent and unknown; `approve`:
 * listed, and each call needs a person's approval (Governance.decide).
 */
import { createHash } from "node:crypto";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Clock } from "../clock.js";
import type { GovernanceSettings } from "../config/governance.js";
import type { Logger } from "../logging.js";
import type { PinRecord, Store } from "../store/contracts.js";
import { canonical } from "./match.js";

export type PinMode = GovernanceSettings["pins"]["mode"];

export interface PinsDeps {
  clock: Clock;
  logger: Logger;
  store: () => Store;
  /** The mode in force (a reload may change it). */
  mode: () => PinMode;
}

/** The parts of a tool definition that are pinned: what a model reads and what the call sends. */
export function pinnedPart(tool: Tool): Record<string, unknown> {
  const { description, title, inputSchema, outputSchema, annotations } = tool;
  return JSON.parse(JSON.stringify({ description, title, inputSchema, outputSchema, annotations })) as Record<string, unknown>;
}

/** SHA-256 (hex) of the pinned part as canonical JSON. */
export const definitionDigest = (tool: Tool): string =>
  createHash("sha256")
    .update(JSON.stringify(canonical(pinnedPart(tool))))
    .digest("hex");

/** How a pin is named in decision records and errors. */
export const pinId = (server: string, tool: string): string => `pin:${server}/${tool}`;

interface Seen {
  digest: string;
  quarantined: boolean;
}

export class Pins {
  /** What this replica last saw of each (server, tool): a pinned digest needs no store read again. */
  private readonly seen = new Map<string, Seen>();

  constructor(private readonly deps: PinsDeps) {}

  get mode(): PinMode {
    return this.deps.mode();
  }

  /** The tools as the gateway may use them: each seen is pinned or checked against its pin; `hide` drops the quarantined ones. */
  async review(server: string, tools: Tool[]): Promise<Tool[]> {
    if (this.mode === "off") return tools;
    const quarantined = await Promise.all(tools.map((t) => this.observe(server, t)));
    return this.mode === "hide" ? tools.filter((_, i) => !quarantined[i]) : tools;
  }

  /** For a call: the pin's id when the tool is quarantined (as this replica saw it, or the store says), else undefined. */
  async quarantined(server: string, tool: string): Promise<string | undefined> {
    if (this.mode === "off") return undefined;
    const key = JSON.stringify([server, tool]);
    const mine = this.seen.get(key);
    if (mine && !mine.quarantined) return undefined;
    const pin = await this.deps.store().pins.get(server, tool);
    if (!mine) return pin?.pending ? pinId(server, tool) : undefined;
    if (pin?.pinned.digest === mine.digest) {
      mine.quarantined = false; // accepted meanwhile (maybe on another replica)
      return undefined;
    }
    return pinId(server, tool);
  }

  /** Pins the pending definition `digest` (an admin accepted it); the pin after, or undefined when that is no longer pending. */
  async accept(server: string, tool: string, digest: string, by: string): Promise<PinRecord | undefined> {
    const done = await this.deps.store().pins.accept(server, tool, digest, by, this.deps.clock.now());
    if (done) {
      const mine = this.seen.get(JSON.stringify([server, tool]));
      if (mine?.digest === digest) mine.quarantined = false;
      this.deps.logger.info({ server, tool, digest, by }, "tool_definition_accepted");
    }
    return done;
  }

  /** Whether `tool` is quarantined; pins it when it is the first definition seen. */
  private async observe(server: string, tool: Tool): Promise<boolean> {
    const key = JSON.stringify([server, tool.name]);
    const digest = definitionDigest(tool);
    const mine = this.seen.get(key);
    if (mine?.digest === digest && !mine.quarantined) return false;
    const pins = this.deps.store().pins;
    const seen = { digest, definition: pinnedPart(tool), at: this.deps.clock.now() };
    const pin = (await pins.get(server, tool.name)) ?? (await pins.pinIfAbsent(server, tool.name, seen));
    const quarantined = pin.pinned.digest !== digest;
    if (quarantined && pin.pending?.digest !== digest) {
      await pins.quarantine(server, tool.name, seen);
      this.deps.logger.warn({ server, tool: tool.name, pinned: pin.pinned.digest, seen: digest }, "tool_definition_quarantined");
    }
    this.seen.set(key, { digest, quarantined });
    return quarantined;
  }
}
