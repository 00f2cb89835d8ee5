/**
 * search_tools (design MF-21, docs/adr/0026): ranked tool matches over every
 * server the caller sees, from the gateway's index (../search/index.ts).
 * searchTools() is the one operation; the meta tool and run_code's
 * `mcp.search` both call it. Servers the session has not connected yet are
 * connected in the background; the query waits for them at most
 * `gateway.toolSearch.connectWaitMs` and names the ones it could not search.
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { principalOf, type Principal } from "../../../auth/principal.js";
import { ErrorCodes, GatewayError, toToolErrorText } from "../../../errors.js";
import type { UpstreamHandle } from "../../../upstream/handle.js";
import type { ServerRegistry } from "../../../upstream/registry.js";
import { defineTool, json, type MetaContext } from "../define.js";
import type * as SearchIndex from "../search/index.js";
import { queryTerms } from "../search/terms.js";

export const SEARCH_DEFAULT_LIMIT = 10;
export const SEARCH_MAX_LIMIT = 50;
const MAX_QUERY_CHARS = 500;
/** A summary is the description's first sentence, at most this long. */
const SUMMARY_CHARS = 160;

export interface ToolSearchOptions {
  query: string;
  /** Only this server's tools. */
  server?: string | undefined;
  /** @default SEARCH_DEFAULT_LIMIT */
  limit?: number | undefined;
  /** Each hit carries the tool's input schema. @default false */
  includeSchema?: boolean | undefined;
  /** Whose view (visibility, curation); undefined: no authentication. */
  principal: Principal | undefined;
}

export interface ToolSearchHit {
  server: string;
  name: string;
  title?: string;
  summary: string;
  score: number;
  input_schema?: Tool["inputSchema"];
}

export interface ToolSearchResult {
  query: string;
  results: ToolSearchHit[];
  /** How many tools matched before `limit`. */
  total_matches: number;
  /** Servers searched, and their tool count as the caller sees them. */
  indexed: Array<{ server: string; tools: number }>;
  /** Servers not searched: still connecting (try again shortly) or failing. */
  not_indexed: Array<{ server: string; status: "connecting" | "error"; error?: string }>;
}

/** One index per gateway (by its registry), made on the first search. */
const indexes = new WeakMap<ServerRegistry, SearchIndex.ToolSearchIndex>();
/** The index and minisearch, loaded at the first search (docs/adr/0045): a gateway nobody searches never loads them. */
let indexModule: Promise<typeof SearchIndex> | undefined;

async function indexOf(registry: ServerRegistry): Promise<SearchIndex.ToolSearchIndex> {
  const { ToolSearchIndex } = await (indexModule ??= import("../search/index.js"));
  let index = indexes.get(registry);
  if (!index) {
    index = new ToolSearchIndex();
    indexes.set(registry, index);
  }
  return index;
}

/** The search itself (throws EMCP_BAD_ARGUMENTS / EMCP_UNKNOWN_SERVER). */
export async function searchTools(ctx: MetaContext, options: ToolSearchOptions): Promise<ToolSearchResult> {
  const { session, gateway } = ctx;
  const query = options.query.trim();
  const limit = options.limit ?? SEARCH_DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > SEARCH_MAX_LIMIT) {
    throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `limit must be a whole number from 1 to ${SEARCH_MAX_LIMIT} (default ${SEARCH_DEFAULT_LIMIT})`);
  }
  if (query.length === 0 || query.length > MAX_QUERY_CHARS) {
    throw new GatewayError(
      ErrorCodes.BAD_ARGUMENTS,
      `query must be 1 to ${MAX_QUERY_CHARS} characters: a few words about what the tool does, e.g. "read a file" or "create issue"`,
    );
  }
  if (queryTerms(query).length === 0) {
    throw new GatewayError(
      ErrorCodes.BAD_ARGUMENTS,
      `query ${JSON.stringify(query)} has no searchable words (only common words or punctuation); name what the tool does, e.g. "send email"`,
    );
  }
  const names = options.server !== undefined ? [gateway.registry.require(options.server, session).name] : gateway.registry.names(session);
  const index = await indexOf(gateway.registry);
  index.retain(new Set(gateway.registry.names()));
  const { ready, notIndexed } = await connections(ctx, names);
  const views = new Set<string>();
  const indexed: ToolSearchResult["indexed"] = [];
  await Promise.all(
    ready.map(async (conn) => {
      try {
        const tools = visibleTools(ctx, options.principal, conn.name, await conn.cachedTools());
        views.add(index.add(conn.name, tools));
        indexed.push({ server: conn.name, tools: tools.length });
      } catch (err) {
        notIndexed.push({ server: conn.name, status: "error", error: toToolErrorText(err, session.logger) });
      }
    }),
  );
  const hits = index.query(query, views);
  const top = hits.slice(0, limit);
  const best = top[0]?.score ?? 1;
  return {
    query,
    results: top.map((h) => {
      const tool = index.tool(h.view, h.server, h.name)!;
      const title = tool.title ?? tool.annotations?.title;
      return {
        server: h.server,
        name: h.name,
        ...(title ? { title } : {}),
        summary: summary(tool.description),
        // Relative to the best hit (1 = best): BM25 values mean nothing across queries.
        score: Math.round((h.score / best) * 1000) / 1000,
        ...(options.includeSchema ? { input_schema: tool.inputSchema } : {}),
      };
    }),
    total_matches: hits.length,
    indexed: indexed.sort((a, b) => names.indexOf(a.server) - names.indexOf(b.server)),
    not_indexed: notIndexed.sort((a, b) => names.indexOf(a.server) - names.indexOf(b.server)),
  };
}

/**
 * The session's live connections among `names`; the others start connecting
 * now (in the background, kept for later searches) and are waited for at most
 * connectWaitMs together.
 */
async function connections({ session, gateway }: MetaContext, names: readonly string[]) {
  const ready: UpstreamHandle[] = [];
  const notIndexed: ToolSearchResult["not_indexed"] = [];
  const waiting: Array<{ name: string; outcome: Promise<UpstreamHandle | Error> }> = [];
  for (const name of names) {
    const live = session.liveConnections().find((c) => c.name === name);
    if (live) ready.push(live);
    else waiting.push({ name, outcome: session.connection(name).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err)))) });
  }
  if (waiting.length === 0) return { ready, notIndexed };
  let timer: ReturnType<typeof gateway.clock.setTimeout> | undefined;
  const timeUp = new Promise<"time_up">((resolve) => {
    timer = gateway.clock.setTimeout(() => resolve("time_up"), gateway.settings.toolSearch.connectWaitMs);
  });
  try {
    const outcomes = await Promise.all(waiting.map((w) => Promise.race([w.outcome, timeUp])));
    outcomes.forEach((o, i) => {
      const { name } = waiting[i]!;
      if (o === "time_up") notIndexed.push({ server: name, status: "connecting" });
      else if (o instanceof Error) notIndexed.push({ server: name, status: "error", error: toToolErrorText(o, session.logger) });
      else ready.push(o);
    });
  } finally {
    gateway.clock.clearTimeout(timer);
  }
  return { ready, notIndexed };
}

/**
 * The tools of `server` the caller may see, as the caller sees them: the
 * check list_tools makes (gateway.governance.visibility), then curation
 * (Curation.viewAll: renamed, overridden, shadowed ones out).
 */
function visibleTools({ gateway }: MetaContext, principal: Principal | undefined, server: string, tools: readonly Tool[]): Tool[] {
  const visible = tools.filter((t) => gateway.governance?.visible(principal, server, t.name) ?? true);
  return gateway.curation?.viewAll(principal, server, visible) ?? visible;
}

/** The description's first sentence or line, shortened to SUMMARY_CHARS. */
function summary(description: string | undefined): string {
  const text = (description ?? "").trim();
  const first = text.split(/\n|(?<=[.!?])\s/)[0] ?? "";
  return first.length > SUMMARY_CHARS ? `${first.slice(0, SUMMARY_CHARS - 1)}…` : first;
}

export const searchToolsTool = defineTool({
  name: "search_tools",
  title: "Search upstream tools",
  description: `Find the right tool among every server's tools by what it does: ranked matches over tool names, titles, descriptions and parameter names (prefix and typo tolerant). Each hit gives server, name, a one-line summary and a relative score (1 = best); set include_schema to get the input schemas, then call the tool with execute_tool. Cheaper than list_tools when there are many tools. Servers not connected yet are connected in the background and named in not_indexed; search again shortly to include them.`,
  input: {
    query: z.string().max(MAX_QUERY_CHARS).describe('What the tool should do, in a few words (e.g. "read file", "create github issue")'),
    server: z.string().optional().describe("Only this server's tools"),
    limit: z
      .number()
      .int()
      .min(1)
      .max(SEARCH_MAX_LIMIT)
      .optional()
      .describe(`Most hits returned (default ${SEARCH_DEFAULT_LIMIT}, at most ${SEARCH_MAX_LIMIT})`),
    include_schema: z.boolean().optional().describe("Include each hit's input schema (default false)"),
  },
  annotations: { readOnlyHint: true },
  async run(ctx, { query, server, limit, include_schema }, extra) {
    const result = await searchTools(ctx, { query, server, limit, includeSchema: include_schema, principal: principalOf(extra.authInfo) });
    const pending = result.not_indexed.length ? ` ${result.not_indexed.length} server(s) not searched yet: see not_indexed.` : "";
    return json({ ...result }, `${result.results.length} of ${result.total_matches} matching tools.${pending}`);
  },
});
