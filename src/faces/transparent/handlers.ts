/**
 * Request handlers of the transparent face. Single-server faces forward
 * requests verbatim (cursors included); the aggregate gathers every upstream,
 * prefixes names, routes resource URIs back to their owner and paginates.
 * Upstream JSON-RPC errors reach the client unchanged.
 */
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  type LoggingLevel,
  ListResourceTemplatesRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { UriTemplate } from "@modelcontextprotocol/sdk/shared/uriTemplate.js";
import { principalOf } from "../../auth/principal.js";
import { assertArgumentsSize, ErrorCodes, GatewayError, toToolErrorText } from "../../errors.js";
import { toMcpTask } from "../../mcp/task-object.js";
import type { UpstreamHandle } from "../../upstream/handle.js";
import { consentOptions, withConsent } from "../../session/consent-wait.js";
import { forwardProgress } from "../progress.js";
import { logToolCall, resultOutcome } from "../access-log.js";
import { paginate } from "./catalog.js";
import { assertPromptVisible, assertResourceVisible, visiblePrompts, visibleResources, visibleTemplates, type Viewer } from "../../governance/visibility.js";
import { verbatimErrors, type HandlerContext } from "./context.js";
import { faceTools, resolveTool } from "./curated.js";
import { callTool, honouredTool, registerTaskHandlers } from "./tasks.js";

/**
 * `_meta` key of an aggregated list result that lacks some upstreams' items:
 * `[{ server, reason }]`, one per upstream that could not be listed (the
 * gateway log has `aggregate_list_failed` too). Absent when all answered.
 */
export const UNAVAILABLE_META_KEY = "emceepee/unavailable";

type Unavailable = Array<{ server: string; reason: string }>;
const unavailableMeta = (failed: Unavailable) => (failed.length ? { _meta: { [UNAVAILABLE_META_KEY]: failed } } : {});

/** What the face does when a missing upstream joins the aggregate (TF-10): it gets the client's logging level. */
export type JoinedHook = (server: string) => void;

export function registerHandlers(h: HandlerContext): JoinedHook {
  const { session, catalog, capabilities } = h;
  const server = verbatimErrors(h.server);
  const single = catalog.target.kind === "server";
  // What these throw reaches the client through verbatimErrors (the face's one error boundary).
  const conn = (name: string): Promise<UpstreamHandle> => session.connection(name);
  /** Every upstream of the face that connects within the bound (aggregate.ts, design TF-10), in catalog order. */
  const each = async <T>(read: (c: UpstreamHandle, server: string) => Promise<T[]>, failed?: Unavailable): Promise<Array<{ server: string; item: T }>> => {
    const { connected, missing } = await h.aggregate.reach(catalog.servers());
    for (const m of missing) {
      session.logger.warn({ server: m.server, err: m.reason }, "aggregate_list_failed");
      failed?.push(m);
    }
    const rows = await Promise.all(
      connected.map(async ({ server: s, conn: c }) => {
        try {
          return (await read(c, s)).map((item) => ({ server: s, item }));
        } catch (err) {
          session.logger.warn({ server: s, err: toToolErrorText(err) }, "aggregate_list_failed");
          failed?.push({ server: s, reason: toToolErrorText(err) });
          return [];
        }
      }),
    );
    return rows.flat();
  };
  const router = new ResourceRouter();
  const virtualServer = catalog.target.kind === "virtual" ? catalog.target.name : undefined;

  if (capabilities.tools) {
    // What the caller sees: visibility (gateway.governance), curation and the face's naming (curated.ts, docs/adr/0024).
    server.setRequestHandler(ListToolsRequestSchema, async (req, extra) => {
      const principal = principalOf(extra.authInfo);
      if (single) {
        const s = catalog.servers()[0]!;
        const c = await conn(s);
        const listed = await c.listToolsPage(req.params);
        // Pinned definitions (docs/adr/0029): a page read verbatim passes the pins too.
        listed.tools = await c.reviewTools(listed.tools);
        return {
          ...listed,
          tools: faceTools(
            h,
            principal,
            listed.tools.map((item) => ({ server: s, item })),
          ).map((t) => honouredTool(t.tool)),
        };
      }
      const failed: Unavailable = [];
      const rows = await each((c) => (c.capabilities?.tools ? c.cachedTools() : Promise.resolve([])), failed);
      const tools = faceTools(h, principal, rows).map((t) => honouredTool(t.tool));
      const { page, nextCursor } = paginate(tools, req.params?.cursor);
      return { tools: page, ...(nextCursor ? { nextCursor } : {}), ...unavailableMeta(failed) };
    });
    server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
      const principal = principalOf(extra.authInfo);
      // The upstream's own server and tool names from here on: the decision pipeline, rate limits and the access log see those.
      const { server: upstream, tool: name } = resolveTool(h, principal, req.params.name);
      assertArgumentsSize(req.params.arguments, h.gateway.settings.tools.maxArgumentsBytes);
      // The access log's line (access-log.ts); a task-augmented call answered with a task is "promoted".
      const entry = { face: catalog.target.kind, server: upstream, tool: name, principalHash: principal?.hash };
      const run = async () => {
        // Fixed and default arguments (curation): the pipeline decides on what is sent upstream.
        const args = h.gateway.curation ? h.gateway.curation.arguments(principal, upstream, name, req.params.arguments, req.params.name) : req.params.arguments;
        // The decision pipeline (docs/adr/0022): a hidden tool is unknown, a denied call fails here.
        const approvals = h.gateway.approvals;
        const decision = await h.gateway.governance?.authorize({
          ...entry,
          principal,
          sessionId: session.id,
          args,
          virtualServer,
          waitsForApproval: approvals !== undefined,
        });
        // Rate limits (docs/adr/0023): refused here, before anything is sent upstream or a task is made.
        await h.gateway.rateLimits?.take({ principal, server: upstream, tool: name });
        // A person must approve it (docs/adr/0025): a task at once for a task-augmented call, else the call is held.
        if (decision?.outcome === "approval_required" && approvals) {
          const client = h.server.getClientVersion();
          const call = {
            session,
            decision,
            principal,
            face: catalog.target.kind,
            virtualServer,
            server: upstream,
            tool: name,
            args,
            ...(client ? { client: `${client.name} ${client.version}` } : {}),
          };
          if (req.params.task) {
            const ttlMs = Math.min(req.params.task.ttl ?? h.gateway.settings.tasks.defaultTtlMs, h.gateway.settings.tasks.maxTtlMs);
            return { task: toMcpTask((await approvals.open({ ...call, ttlMs })).task) };
          }
          const progress = forwardProgress(extra, req.params._meta?.progressToken);
          const result = await approvals.hold(call, extra.signal, progress.onprogress);
          await progress.flush();
          return result;
        }
        const { arguments: _asked, ...params } = req.params;
        const send = args !== undefined ? { ...params, arguments: args } : params;
        // A call that needs the person's consent waits for it and goes on (session/consent-wait.ts).
        const consent = consentOptions({ gateway: h.gateway, principal: session.principal, clientCapabilities: h.server.getClientCapabilities(), extra });
        return withConsent(consent, async () => callTool(h, await conn(upstream), send, name, extra));
      };
      return logToolCall(h.gateway, session, entry, extra.signal, run, (r) => ("task" in r ? "promoted" : resultOutcome(r)));
    });
    registerTaskHandlers(h, conn);
  }

  // Hidden resources, templates and prompts (gateway.governance.visibility) are absent from lists and unknown by name (governance/visibility.ts).
  const viewer = (extra: { authInfo?: Parameters<typeof principalOf>[0] }): Viewer => ({
    governance: h.gateway.governance,
    principal: principalOf(extra.authInfo),
  });
  if (capabilities.resources) {
    server.setRequestHandler(ListResourcesRequestSchema, async (req, extra) => {
      if (single) {
        const s = catalog.servers()[0]!;
        const page = await (await conn(s)).listResourcesPage(req.params);
        return { ...page, resources: visibleResources(viewer(extra), s, page.resources) };
      }
      const failed: Unavailable = [];
      const rows = await each((c) => c.listResources(), failed);
      router.learnResources(rows.map((r) => ({ server: r.server, uri: r.item.uri })));
      const { page, nextCursor } = paginate(
        rows.filter((r) => visibleResources(viewer(extra), r.server, [r.item]).length > 0).map((r) => r.item),
        req.params?.cursor,
      );
      return { resources: page, ...(nextCursor ? { nextCursor } : {}), ...unavailableMeta(failed) };
    });
    server.setRequestHandler(ListResourceTemplatesRequestSchema, async (req, extra) => {
      if (single) {
        const s = catalog.servers()[0]!;
        const page = await (await conn(s)).listResourceTemplatesPage(req.params);
        return { ...page, resourceTemplates: visibleTemplates(viewer(extra), s, page.resourceTemplates) };
      }
      const failed: Unavailable = [];
      const rows = await each((c) => c.listResourceTemplates(), failed);
      router.learnTemplates(rows.map((r) => ({ server: r.server, template: r.item.uriTemplate })));
      const { page, nextCursor } = paginate(
        rows.filter((r) => visibleTemplates(viewer(extra), r.server, [r.item]).length > 0).map((r) => r.item),
        req.params?.cursor,
      );
      return { resourceTemplates: page, ...(nextCursor ? { nextCursor } : {}), ...unavailableMeta(failed) };
    });
    const owner = async (uri: string, who: Viewer): Promise<UpstreamHandle> => {
      if (single) {
        assertResourceVisible(who, catalog.servers()[0]!, uri);
        return conn(catalog.servers()[0]!);
      }
      let found = router.route(uri);
      if (found === undefined) {
        // Learn the lists once, then try again.
        router.learnResources((await each((c) => c.listResources())).map((r) => ({ server: r.server, uri: r.item.uri })));
        router.learnTemplates((await each((c) => c.listResourceTemplates())).map((r) => ({ server: r.server, template: r.item.uriTemplate })));
        found = router.route(uri);
      }
      if (found === undefined) {
        throw new GatewayError(ErrorCodes.UNKNOWN_RESOURCE, `no upstream lists a resource or template matching '${uri}'`, { details: { uri } });
      }
      assertResourceVisible(who, found, uri);
      return conn(found);
    };
    server.setRequestHandler(ReadResourceRequestSchema, async (req, extra) =>
      (await owner(req.params.uri, viewer(extra))).readResource(req.params.uri, req.params._meta),
    );
    if (capabilities.resources.subscribe) {
      server.setRequestHandler(SubscribeRequestSchema, async (req, extra) =>
        (await owner(req.params.uri, viewer(extra))).subscribeResource(req.params.uri, req.params._meta),
      );
      server.setRequestHandler(UnsubscribeRequestSchema, async (req, extra) =>
        (await owner(req.params.uri, viewer(extra))).unsubscribeResource(req.params.uri, req.params._meta),
      );
    }
  }

  if (capabilities.prompts) {
    server.setRequestHandler(ListPromptsRequestSchema, async (req, extra) => {
      if (single) {
        const s = catalog.servers()[0]!;
        const page = await (await conn(s)).listPromptsPage(req.params);
        return { ...page, prompts: visiblePrompts(viewer(extra), s, page.prompts) };
      }
      const failed: Unavailable = [];
      const rows = (await each((c) => c.listPrompts(), failed)).filter((r) => visiblePrompts(viewer(extra), r.server, [r.item]).length > 0);
      const prompts = rows.map(({ server: s, item }) => ({ ...item, name: catalog.expose(s, item.name) }));
      catalog.assertUnique(
        prompts.map((p, i) => ({ exposed: p.name, server: rows[i]!.server })),
        "prompt",
      );
      const { page, nextCursor } = paginate(prompts, req.params?.cursor);
      return { prompts: page, ...(nextCursor ? { nextCursor } : {}), ...unavailableMeta(failed) };
    });
    server.setRequestHandler(GetPromptRequestSchema, async (req, extra) => {
      const { server: upstream, name } = catalog.resolve(req.params.name, "prompt");
      assertPromptVisible(viewer(extra), upstream, name, req.params.name);
      return (await conn(upstream)).getPrompt(name, req.params.arguments, req.params._meta);
    });
  }

  if (capabilities.completions) {
    server.setRequestHandler(CompleteRequestSchema, async (req, extra) => {
      const ref = req.params.ref;
      if (ref.type === "ref/prompt") {
        const { server: upstream, name } = catalog.resolve(ref.name, "prompt");
        assertPromptVisible(viewer(extra), upstream, name, ref.name);
        return (await conn(upstream)).complete({ ...req.params, ref: { ...ref, name } });
      }
      const target = single ? catalog.servers()[0]! : router.routeTemplate(ref.uri);
      if (target === undefined)
        throw new GatewayError(ErrorCodes.UNKNOWN_RESOURCE, `no upstream has the resource template '${ref.uri}'; list resource templates first`, {
          details: { uri: ref.uri },
        });
      return (await conn(target)).complete(req.params);
    });
  }

  let level: LoggingLevel | undefined;
  if (capabilities.logging) {
    server.setRequestHandler(SetLevelRequestSchema, async (req) => {
      level = req.params.level;
      // setLevel is use (a lazy session connects here, docs/adr/0034): a single face's upstream, or the aggregate's
      // within the bound (TF-10; one that joins later gets the level then).
      if (single) await conn(catalog.servers()[0]!);
      else await h.aggregate.reach(catalog.servers());
      await Promise.all(
        session
          .liveConnections()
          .filter((c) => catalog.servers().includes(c.name) && c.capabilities?.logging)
          .map((c) => c.setLoggingLevel(req.params.level)),
      );
      return {};
    });
  }
  return (joined) => {
    const c = session.liveConnections().find((l) => l.name === joined);
    if (level === undefined || !c?.capabilities?.logging) return;
    c.setLoggingLevel(level).catch((err: unknown) => session.logger.warn({ server: joined, level, err: toToolErrorText(err) }, "aggregate_set_level_failed"));
  };
}

/** Remembers which upstream owns which resource URI / template (aggregate face). */
class ResourceRouter {
  private readonly uris = new Map<string, string>();
  private templates: Array<{ server: string; template: string; matcher: UriTemplate }> = [];

  learnResources(rows: Array<{ server: string; uri: string }>): void {
    for (const r of rows) if (!this.uris.has(r.uri)) this.uris.set(r.uri, r.server);
  }

  learnTemplates(rows: Array<{ server: string; template: string }>): void {
    this.templates = rows.map((r) => ({ ...r, matcher: new UriTemplate(r.template) }));
  }

  route(uri: string): string | undefined {
    return this.uris.get(uri) ?? this.templates.find((t) => t.matcher.match(uri) !== null)?.server;
  }

  routeTemplate(template: string): string | undefined {
    return this.templates.find((t) => t.template === template)?.server;
  }
}
