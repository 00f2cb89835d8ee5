/**
 * `notifications/tools/list_changed` when a reload changes what a session
 * sees (docs/adr/0024): the tool lists of every live session are taken before
 * and after the new governance and curation apply, from the connections the
 * session has (nothing is connected for it), and only those that differ are
 * told. A transparent face registers a watcher (its own list, told with
 * list_changed); every session's per-server view is compared too, and a
 * changed server gets a `notifications/tools/list_changed` event in the
 * session's buffers (what the meta face's await_activity shows).
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Curation } from "../governance/curation.js";
import type { Governance } from "../governance/governance.js";
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
    const result = await apply();
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
    return { result, notified };
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
