/**
 * The gateway's tool search index (design MF-21, docs/adr/0026): one
 * MiniSearch (BM25+, prefix and fuzzy matching) over server name, tool name,
 * title, description and parameter names, for every server the gateway's sessions
 * searched. A server's entry is one *view* of its tools — the tools one caller
 * may see there, as that caller sees them — keyed by the view's digest: a
 * view is indexed once however many sessions show it, a changed list (the
 * upstream's tools/list_changed, a policy reload) is a new digest and
 * replaces the oldest view of that server beyond MAX_VIEWS_PER_SERVER. A
 * query reads only the views the caller holds, so a tool the caller may not
 * see cannot match (it was never in the caller's view).
 */
import { createHash } from "node:crypto";
import MiniSearch from "minisearch";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { searchTerms, tokenize } from "./terms.js";

/** Distinct views kept per server (principals with different visibility or curation; the last few lists). */
const MAX_VIEWS_PER_SERVER = 8;

interface ToolDoc {
  id: string;
  view: string;
  server: string;
  name: string;
  title: string;
  description: string;
  params: string;
}

export interface IndexHit {
  view: string;
  server: string;
  name: string;
  score: number;
}

export class ToolSearchIndex {
  private readonly search = new MiniSearch<ToolDoc>({
    fields: ["server", "name", "title", "description", "params"],
    storeFields: ["view", "server", "name"],
    tokenize,
    processTerm: searchTerms,
  });
  /** View digest → its tools by name, per server (insertion order = age). */
  private readonly views = new Map<string, Map<string, Map<string, Tool>>>();

  /** Indexes `tools` as a view of `server` unless that view is indexed already; returns its key. */
  add(server: string, tools: readonly Tool[]): string {
    const key = `${server}\u0000${createHash("sha256").update(JSON.stringify(tools)).digest("base64url")}`;
    const perServer = this.views.get(server) ?? new Map<string, Map<string, Tool>>();
    this.views.set(server, perServer);
    const known = perServer.get(key);
    if (known) {
      // Most recently used last: eviction takes the oldest.
      perServer.delete(key);
      perServer.set(key, known);
      return key;
    }
    const byName = new Map(tools.map((t) => [t.name, t]));
    perServer.set(key, byName);
    this.search.addAll([...byName.values()].map((t) => toDoc(key, server, t)));
    while (perServer.size > MAX_VIEWS_PER_SERVER) this.dropView(server, perServer.keys().next().value!);
    return key;
  }

  /** Forgets every view of servers not in `known` (removed servers). */
  retain(known: ReadonlySet<string>): void {
    for (const server of [...this.views.keys()]) {
      if (known.has(server)) continue;
      for (const key of [...this.views.get(server)!.keys()]) this.dropView(server, key);
      this.views.delete(server);
    }
  }

  /** The tool of a view (for its schema and summary). */
  tool(view: string, server: string, name: string): Tool | undefined {
    return this.views.get(server)?.get(view)?.get(name);
  }

  /** Ranked matches of `query` within `views` (keys from add()). */
  query(query: string, views: ReadonlySet<string>): IndexHit[] {
    return this.search
      .search(query, {
        boost: { server: 1.5, name: 3, title: 2, params: 1.5 },
        prefix: (term) => term.length >= 3,
        fuzzy: (term) => (term.length >= 5 ? 0.2 : false),
        combineWith: "OR",
        filter: (r) => views.has(r.view as string),
      })
      .map((r) => ({ view: r.view as string, server: r.server as string, name: r.name as string, score: r.score }));
  }

  /** Indexed documents (tests, metrics). */
  get size(): number {
    return this.search.documentCount;
  }

  private dropView(server: string, key: string): void {
    const perServer = this.views.get(server);
    const tools = perServer?.get(key);
    if (!perServer || !tools) return;
    for (const name of tools.keys()) this.search.discard(docId(key, name));
    perServer.delete(key);
  }
}

function docId(view: string, name: string): string {
  return `${view}\u0000${name}`;
}

function toDoc(view: string, server: string, t: Tool): ToolDoc {
  const properties = (t.inputSchema as { properties?: Record<string, { description?: unknown }> } | undefined)?.properties ?? {};
  const params = Object.keys(properties).join(" ");
  return {
    id: docId(view, t.name),
    view,
    server,
    name: t.name,
    title: t.title ?? t.annotations?.title ?? "",
    description: t.description ?? "",
    params,
  };
}
