/**
 * `notifications/tools/list_changed` when a reload changes what a session
 * sees (docs/adr/0024): the tool lists of every live session are taken before
 * and after the new governance and curation apply, from the connections the
 * session has (nothing is connected for it), and only those that differ are
 * told. A transparent face registers a watcher (its own list, told with
 * list_changed); every session's per-server view is compared too, and a
 * changed server gets a `notifications/tools/list_changed` event in the
 * session's buffers (what the meta face's await_activity shows). Resources
 * and prompts (GV-12): when the reload changed what decides their visibility,
 * each live connection's lists are read once and filtered under the old and
 * the new settings; a session whose view of a server's resources (templates
 * included) or prompts differs is told `notifications/resources/list_changed`
 * / `notifications/prompts/list_changed` for that server, in its buffers and
 * on the transparent face that shows it.
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { GovernanceSettings } from "../config/governance.js";
import type { Curation } from "../governance/curation.js";
import type { Governance } from "../governance/governance.js";
import { itemVisibilityKey, itemVisibleUnder } from "../governance/match.js";
import type { UpstreamHandle } from "../upstream/handle.js";
import type { Session } from "./session.js";

/** A face's view of its tool list, for comparison before and after a reload. */
export interface ToolViewWatcher {
  /** What the client sees now, as a string compared before and after (live connections only). */
  fingerprint(): Promise<string>;
  /** The view changed: tell the client. */
  changed(): void;
}

export interface ToolViewsDeps {
  sessions: () => readonly Session[];
  curation: () => Curation | undefined;
  governance: () => Governance | undefined;
}

export class ToolViews {
  private readonly watchers = new Set<ToolViewWatcher>();

  constructor(private readonly deps: ToolViewsDeps) {}

  /** Registers a face's watcher until the returned function is called (the face closed). */
  watch(w: ToolViewWatcher): () => void {
    this.watchers.add(w);
    return () => this.watchers.delete(w);
  }

  /** Runs `apply` (the reload); then tells each face and session whose tool view it changed. Returns how many were told. */
  async around<T>(apply: () => Promise<T>): Promise<{ result: T; notified: number }> {
    const watchers = [...this.watchers];
    const sessions = [...this.deps.sessions()];
    const before = await this.snapshot(watchers, sessions);
    const settingsBefore = this.deps.governance()?.settingsInForce;
    const result = await apply();
    const settingsAfter = this.deps.governance()?.settingsInForce;
    const after = await this.snapshot(watchers, sessions);
    let notified = 0;
    watchers.forEach((w, i) => {
      if (before.faces[i] === after.faces[i] || !this.watchers.has(w)) return;
      notified++;
      w.changed();
    });
    sessions.forEach((s, i) => {
      const was = before.sessions[i]!;
      const now = after.sessions[i]!;
      const changed = [...new Set([...was.keys(), ...now.keys()])].filter((server) => was.get(server) !== now.get(server));
      for (const server of changed) s.buffers.addNotification(server, "notifications/tools/list_changed", undefined);
      if (changed.length) notified++;
    });
    if (settingsBefore && settingsAfter && itemVisibilityKey(settingsBefore) !== itemVisibilityKey(settingsAfter))
      notified += await this.itemsChanged(sessions, settingsBefore, settingsAfter);
    return { result, notified };
  }

  /** Tells each session whose view of a server's resources or prompts differs under `after`; returns how many were told. */
  private async itemsChanged(sessions: readonly Session[], before: GovernanceSettings, after: GovernanceSettings): Promise<number> {
    const lists = new Map<UpstreamHandle, Promise<ItemLists | undefined>>();
    const listsOf = (c: UpstreamHandle) => {
      let p = lists.get(c);
      if (!p) lists.set(c, (p = readItems(c)));
      return p;
    };
    let notified = 0;
    for (const s of sessions) {
      let told = false;
      for (const c of s.liveConnections()) {
        const items = await listsOf(c);
        if (!items || s.isClosed) continue;
        const view = (settings: GovernanceSettings, kind: "resource" | "prompt", names: readonly string[]) =>
          names.filter((name) => itemVisibleUnder(settings, { principal: s.principal, server: c.name, kind, name })).join("\n");
        if (view(before, "resource", items.resources) !== view(after, "resource", items.resources)) {
          s.listChanged(c.name, "resources");
          told = true;
        }
        if (view(before, "prompt", items.prompts) !== view(after, "prompt", items.prompts)) {
          s.listChanged(c.name, "prompts");
          told = true;
        }
      }
      if (told) notified++;
    }
    return notified;
  }

  private async snapshot(watchers: readonly ToolViewWatcher[], sessions: readonly Session[]) {
    const faces = await Promise.all(watchers.map((w) => w.fingerprint().catch(() => "")));
    const views = await Promise.all(sessions.map((s) => this.sessionView(s)));
    return { faces, sessions: views };
  }

  /** Per connected server: the tools this session's principal sees there (visibility and curation), as JSON. */
  private async sessionView(session: Session): Promise<Map<string, string>> {
    const curation = this.deps.curation();
    const governance = this.deps.governance();
    const view = new Map<string, string>();
    for (const c of session.liveConnections()) {
      let tools: Tool[];
      try {
        tools = await c.cachedTools();
      } catch {
        continue;
      }
      const visible = tools.filter((t) => governance?.visible(session.principal, c.name, t.name) ?? true);
      const shown = curation?.viewAll(session.principal, c.name, visible) ?? visible;
      view.set(c.name, JSON.stringify(shown));
    }
    return view;
  }
}

/** A connection's resource URIs and template uriTemplates (one list: visibility matches both alike) and prompt names. */
interface ItemLists {
  resources: string[];
  prompts: string[];
}

/** Read once per connection for a reload's comparison; an upstream that fails to answer is left out (nobody is told about it). */
async function readItems(c: UpstreamHandle): Promise<ItemLists | undefined> {
  try {
    const [resources, templates, prompts] = await Promise.all([c.listResources(), c.listResourceTemplates(), c.listPrompts()]);
    return { resources: [...resources.map((r) => r.uri), ...templates.map((t) => t.uriTemplate)], prompts: prompts.map((p) => p.name) };
  } catch {
    return undefined;
  }
}
