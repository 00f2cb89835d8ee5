/**
 * The web console (docs/adr/0012-console.md): pages for people at /console,
 * served on the gateway's own listener after its Host/Origin/token guards
 * (src/http/guards.ts: token by bearer header or the login cookie, same-origin
 * POSTs). This module owns the routes and the actions; read-model.ts what is
 * shown, views/ how, live.ts the SSE that keeps pages current, form.ts the
 * elicitation forms.
 *
 * Actions go through the gateway's own paths: answers through
 * answerElicitation / answerSampling (what respond_to_elicitation and
 * respond_to_sampling run, marked as answered "by console"), cancels through
 * TaskManager.cancel (what cancel_task runs). The first answer wins; the
 * loser is told who answered (PendingRequests).
 *
 * With replicas (gateway.cluster, `peers`), every page also shows the other
 * live replicas' sessions, tasks and requests, and an answer or a cancel for
 * a session held elsewhere is sent to its replica, which runs it through
 * these same paths (cluster.ts).
 */
import type http from "node:http";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import { answerElicitation, type ElicitationAnswer } from "../faces/meta/tools/elicitation.js";
import { answerSampling } from "../faces/meta/tools/sampling.js";
import { secretEquals } from "../auth/secret.js";
import { CONSOLE_CALLBACK_PATH, CONSOLE_CSS_PATH, CONSOLE_LOGIN_PATH, UPSTREAM_CALLBACK_PATH, isConsolePath } from "../http/guards.js";
import type { Peers } from "../cluster/index.js";
import type { PageHandler } from "../http/server.js";
import type { GatewayContext } from "../session/gateway-context.js";
import type { Session } from "../session/session.js";
import { CONSOLE_CSS, CONSOLE_JS } from "./assets.js";
import {
  bindingCookie,
  clearBindingCookie,
  cookieOptions,
  loginCookie,
  loginCookieMatches,
  logoutCookie,
  sessionCookie,
  type CookieOptions,
} from "./cookies.js";
import { ConsoleOidc, type ConsoleUser } from "./oidc.js";
import {
  CONNECTIONS_PATH,
  UPSTREAM_COMPLETE_PATH,
  completeUpstreamAuth,
  connectionsBody,
  personOf,
  sendCallbackRefresh,
  type UpstreamAuthCompleter,
} from "./upstream-auth.js";
import { OPERATOR, makePrincipal, samePrincipal } from "../auth/principal.js";
import { accepts } from "../mcp/media-type.js";
import { CLUSTER_PREFIX, RemoteConsole, serveCluster, type AnswerOutcome, type CancelOutcome, type ConsoleScope, type LocalConsole } from "./cluster.js";
import { formContent, type RequestedSchema } from "./form.js";
import { html, type Html } from "./html.js";
import { FormError, SECURITY_HEADERS, readForm, redirect, sendHtml, sendText } from "./http.js";
import { ConsoleLive } from "./live.js";
import { LoginLimiter } from "./login-limit.js";
import { Router, type ConsoleRequest, type Route } from "./router.js";
import {
  describeInbox,
  findTask,
  inbox,
  listTasks,
  mergeOverviews,
  overview,
  sessionByRef,
  sortInbox,
  sortTasks,
  type ConsoleSources,
  type InboxItem,
  type Overview,
  type TaskFilter,
  type TaskRow,
} from "./read-model.js";
import { activityBody, pageQuery, WITHIN, type ActivityFilter } from "./views/activity.js";
import { ACTIVITY_KINDS } from "../session/activity-log.js";
import type { ActivityKind, ActivityRecord } from "../store/contracts.js";
import { approvalsBody } from "./views/approvals.js";
import { governanceRoutes } from "./governance-pages.js";
import { inboxBody, type InboxError } from "./views/inbox.js";
import { secretsBody, sendConnectContinue } from "./views/connections.js";
import { callsOver, toolStats, upstreamsBody, type UpstreamRow } from "./views/upstreams.js";
import { describeTarget } from "../upstream/registry.js";
import { sessionHash } from "../logging.js";
import { page, type PageOptions } from "./views/layout.js";
import { loginBody } from "./views/login.js";
import { overviewBody } from "./views/overview.js";
import { endedTaskBody, taskBody, taskListBody } from "./views/tasks.js";

/** Activity records per page. */
const PAGE_SIZE = 50;
/** Recorded calls per server the Upstreams page reads for its statistics (the newest, within 24 h). */
const STATS_RECORDS = 5_000;
/** How a task ends. */
const ENDED = new Set(["completed", "failed", "cancelled", "expired"]);

export interface ConsoleOptions {
  context: GatewayContext;
  /** Stdio upstream processes running now. */
  childProcesses: () => number;
  /** The other replicas (gateway.cluster on): the console shows and answers theirs too. */
  peers?: Peers | undefined;
  /** Completes people's authorizations at upstreams' OAuth servers (issue 23; absent: no vault). */
  upstreamAuth?: UpstreamAuthCompleter | undefined;
  /** The live stream's counter, made (and started) before the pages loaded (lazy.ts); absent: made here. */
  live?: ConsoleLive | undefined;
}

export interface WebConsole {
  /** For createHttpServer's `pages`: answers every path under /console. */
  readonly handle: PageHandler;
  readonly live: ConsoleLive;
  /** The route table (router.ts), for tests that hold it against the guards. */
  readonly routes: readonly Route[];
  start(): void;
  /** Ends the live streams and their timers (before the listener closes). */
  close(): void;
}

interface Asset {
  type: string;
  body: string;
}

const ASSETS: Record<string, Asset> = {
  "/console/assets/console.css": { type: "text/css; charset=utf-8", body: CONSOLE_CSS },
  "/console/assets/console.js": { type: "text/javascript; charset=utf-8", body: CONSOLE_JS },
};

export function createConsole(options: ConsoleOptions): WebConsole {
  const { context } = options;
  const remote = options.peers ? new RemoteConsole(options.peers, context.logger) : undefined;
  const live =
    options.live ??
    new ConsoleLive({
      sessions: context.sessions,
      clock: context.clock,
      keepAliveMs: context.settings.http.sseKeepAliveMs,
      ...(remote ? { remoteVersions: () => remote.versions() } : {}),
    });
  const src: ConsoleSources = { context, childProcesses: options.childProcesses, reconnects: live.reconnects };
  // Newly written activity (a tool call changes no session state the other pages watch) updates open pages too.
  const unwatchActivity = context.activity?.onWritten(() => live.poke());
  const token = context.settings.token;
  const maxBody = context.settings.http.maxBodyBytes;
  const logins = new LoginLimiter({
    clock: context.clock,
    maxFailures: context.settings.console.loginMaxFailures,
    windowMs: context.settings.console.loginWindowMs,
  });

  const oidcSettings = context.settings.console.oidc;
  // OpenID Connect logins started per client address: each one is kept in the store (up to maxPendingLogins, for everyone).
  const loginStarts = new LoginLimiter({
    clock: context.clock,
    maxFailures: oidcSettings.maxLoginStartsPerAddress,
    windowMs: context.settings.console.loginWindowMs,
  });
  const oidc =
    oidcSettings.clientId !== undefined
      ? new ConsoleOidc(oidcSettings, context.settings.auth.oauth.issuers[0], context.clock, () => context.store.logins)
      : undefined;
  /** Behind TLS offload (an https public URL) every console cookie is Secure; behind a proxy's path, under it. */
  const cookies: CookieOptions = cookieOptions(context.settings.http.publicUrl);
  const OPERATOR_USER: ConsoleUser = { principal: undefined, role: "admin" };

  /** Who asks: without OIDC the guards let only the token through (the operator); with it, the token (bearer or cookie) or a person's console session. */
  function whoIs(req: http.IncomingMessage): ConsoleUser | undefined {
    if (!oidc) return OPERATOR_USER;
    if (token !== undefined) {
      const bearer = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? "")?.[1]?.trim();
      if ((bearer !== undefined && secretEquals(bearer, token)) || loginCookieMatches(req, token)) return OPERATOR_USER;
    }
    return oidc.user(req);
  }

  /** The read model as `user` may see it: an admin all sessions and servers, anyone else their principal's sessions and runtime servers only. */
  function sourcesFor(user: ConsoleUser): ConsoleSources {
    if (user.role === "admin") return src;
    const p = user.principal;
    return { ...src, sees: (s) => p !== undefined && s.principal !== undefined && samePrincipal(s.principal, p), viewer: { principal: p } };
  }

  /** Whom other replicas answer for: an admin (or the operator) all sessions, a person their principal's; undefined: no one's (nothing to ask). */
  function scopeOf(user: ConsoleUser): ConsoleScope | undefined {
    const p = user.principal;
    const principal = p ? { principal: { issuer: p.issuer, subject: p.subject } } : {};
    if (user.role === "admin") return { all: true, ...principal };
    return p ? { all: false, ...principal } : undefined;
  }

  /** Whom a replica asks for (cluster.ts): an admin for `all`, else the person (their role was checked where they are logged in). */
  function userOf(scope: ConsoleScope): ConsoleUser {
    const p = scope.principal;
    return { principal: p ? makePrincipal({ ...p, scopes: [], claims: {} }) : undefined, role: scope.all ? "admin" : "answerer" };
  }

  /** Every replica's pending requests (this one's alone without a cluster). */
  async function allInbox(user: ConsoleUser): Promise<InboxItem[]> {
    const local = inbox(sourcesFor(user));
    const scope = scopeOf(user);
    if (!remote || !scope) return local;
    const { results } = await remote.gather<InboxItem[]>(`${CLUSTER_PREFIX}inbox`, scope);
    return sortInbox([...local, ...results.flatMap((r) => r.value)]);
  }

  async function allOverview(user: ConsoleUser): Promise<Overview> {
    const local = await overview(sourcesFor(user));
    const scope = scopeOf(user);
    if (!remote || !scope) return local;
    const { results, unreachable } = await remote.gather<Overview>(`${CLUSTER_PREFIX}overview`, scope);
    return mergeOverviews(local, remote.self, results, unreachable);
  }

  async function allTasks(user: ConsoleUser, filter: TaskFilter): Promise<TaskRow[]> {
    const local = await listTasks(sourcesFor(user), filter);
    const scope = scopeOf(user);
    if (!remote || !scope) return local;
    const q = new URLSearchParams(Object.entries(filter).filter((e): e is [string, string] => typeof e[1] === "string" && e[1] !== ""));
    const { results } = await remote.gather<TaskRow[]>(`${CLUSTER_PREFIX}tasks?${q.toString()}`, scope);
    return sortTasks([...local, ...results.flatMap((r) => r.value)]);
  }

  /** A task of this replica, else of another (then without a local session: actions go to its replica). */
  async function anyTask(user: ConsoleUser, taskId: string): Promise<TaskRow | undefined> {
    const found = await findTask(sourcesFor(user), taskId);
    const scope = scopeOf(user);
    if (found || !remote || !scope) return found?.task;
    return (await remote.find<TaskRow>(`${CLUSTER_PREFIX}task?id=${encodeURIComponent(taskId)}`, scope))?.value;
  }

  /** A page with the inbox badge (`items`: the inbox if already read); a bare page (login, which needs no token) asks no replica. */
  const show = async (
    res: http.ServerResponse,
    status: number,
    o: Omit<PageOptions, "inboxCount" | "canLogOut">,
    body: Html,
    items?: InboxItem[],
    headers: Record<string, string | string[]> = {},
  ) => {
    // Without the items read, no badge (what is counted depends on who asks).
    const inboxCount = o.bare ? undefined : items?.length;
    sendHtml(
      res,
      status,
      page(
        {
          ...o,
          ...(inboxCount === undefined ? {} : { inboxCount }),
          ...(context.approvalRecords ? { approvals: true } : {}),
          canLogOut: token !== undefined || oidc !== undefined,
        },
        body,
      ),
      headers,
    );
  };

  /** Answers a request of a session this replica holds ("not_here" otherwise). */
  async function answerHere(requestId: string, form: URLSearchParams, user: ConsoleUser = OPERATOR_USER): Promise<AnswerOutcome> {
    const session = sessionByRef(sourcesFor(user), form.get("session") ?? "");
    if (!session) return { outcome: "not_here" };
    try {
      if (form.get("kind") === "sampling") await answerSamplingForm(session, requestId, form);
      else await answerElicitationForm(session, requestId, form);
    } catch (err) {
      if (err instanceof GatewayError && err.code === ErrorCodes.UNKNOWN_REQUEST)
        return { outcome: "gone", by: session.pending.answeredBy(requestId) ?? "none" };
      if (err instanceof GatewayError && err.code === ErrorCodes.BAD_ARGUMENTS) return { outcome: "invalid", message: err.message };
      throw err;
    }
    return { outcome: "answered" };
  }

  async function cancelHere(taskId: string, user: ConsoleUser = OPERATOR_USER): Promise<CancelOutcome> {
    const found = await findTask(sourcesFor(user), taskId);
    if (!found) return { outcome: "not_here" };
    const who = user.principal ? ` (principal ${user.principal.hash})` : "";
    const outcome = await found.session.tasks.cancel(taskId, `cancelled by a person in the web console${who}`);
    return { outcome: outcome.success ? "ok" : "noop" };
  }

  /** What other replicas may read and do here (cluster.ts serves it to them only). */
  const local: LocalConsole = {
    version: () => live.localVersion,
    overview: (scope) => overview(sourcesFor(userOf(scope))),
    tasks: (scope, filter) => listTasks(sourcesFor(userOf(scope)), filter),
    task: async (scope, taskId) => (await findTask(sourcesFor(userOf(scope)), taskId))?.task,
    inbox: (scope) => inbox(sourcesFor(userOf(scope))),
    // Run here for a person logged in on another replica: recorded here too, naming that replica.
    answer: async (scope, requestId, form, from) => {
      const user = userOf(scope);
      const outcome = await answerHere(requestId, form, user);
      if (outcome.outcome !== "not_here") audit(user, "answer", { requestId, outcome: outcome.outcome, via: from ?? "another replica" });
      return outcome;
    },
    cancel: async (scope, taskId, from) => {
      const user = userOf(scope);
      const outcome = await cancelHere(taskId, user);
      if (outcome.outcome !== "not_here") audit(user, "cancel", { taskId, outcome: outcome.outcome, via: from ?? "another replica" });
      return outcome;
    },
  };

  /** The console's routes (router.ts): 404 and 405 (with Allow) for what is not in the table. */
  const router = new Router(
    (
      [
        { method: "GET", path: CONSOLE_CALLBACK_PATH, auth: "none", handle: callback },
        { method: "GET", path: UPSTREAM_CALLBACK_PATH, auth: "none", handle: ({ req, res }) => sendCallbackRefresh(req, res) },
        { method: "GET", path: UPSTREAM_COMPLETE_PATH, auth: "token", handle: upstreamAuthPage },
        { method: "GET", path: CONNECTIONS_PATH, auth: "token", handle: connectionsPage },
        { method: "POST", path: CONNECTIONS_PATH, auth: "token", handle: changeConnection },
        // The stylesheet needs no login (the login page uses it); the script only serves logged-in pages.
        ...Object.entries(ASSETS).map(([path, asset]): Route => ({
          method: "GET",
          path,
          auth: path === CONSOLE_CSS_PATH ? "none" : "token",
          handle: ({ res }) => sendAsset(res, asset),
        })),
        { method: "GET", path: "/console/events", auth: "token", handle: ({ req, res }) => live.serve(req, res) },
        {
          method: "*",
          path: `${CLUSTER_PREFIX}*`,
          auth: "replica",
          handle: ({ req, res, path }) => serveCluster(req, res, path, options.peers, local, maxBody),
        },
        { method: "GET", path: CONSOLE_LOGIN_PATH, auth: "none", handle: loginPage },
        { method: "POST", path: CONSOLE_LOGIN_PATH, auth: "none", handle: login },
        { method: "POST", path: "/console/logout", auth: "token", handle: logout },
        { method: "GET", path: "/console", auth: "token", handle: overviewPage },
        { method: "GET", path: "/console/", auth: "token", handle: overviewPage },
        { method: "GET", path: "/console/tasks", auth: "token", handle: tasksPage },
        { method: "GET", path: "/console/tasks/:id", auth: "token", handle: taskPage },
        { method: "POST", path: "/console/tasks/:id/cancel", auth: "token", handle: cancel },
        { method: "GET", path: "/console/inbox", auth: "token", handle: inboxPage },
        { method: "GET", path: "/console/activity", auth: "token", handle: activityPage },
        { method: "GET", path: "/console/upstreams", auth: "token", handle: upstreamsPage },
        { method: "POST", path: "/console/inbox/:id", auth: "token", handle: answer },
        // A refused answer re-renders the inbox at the form's URL; reading that URL again (the live script, a reload) shows the inbox.
        { method: "GET", path: "/console/inbox/:id", auth: "token", handle: ({ res }) => redirect(res, "/console/inbox") },
        { method: "GET", path: "/console/approvals", auth: "token", handle: approvalsPage },
        { method: "POST", path: "/console/approvals/:id", auth: "token", handle: decide },
        { method: "GET", path: "/console/approvals/:id", auth: "token", handle: ({ res }) => redirect(res, "/console/approvals") },
        // Pins and Audit, admins only (docs/adr/0029).
        ...governanceRoutes({ context, whoIs, show: (res, status, o, body) => show(res, status, o, body), maxBody }),
      ] satisfies Route[]
    ).map(needsLogin),
    async ({ req, res, path }) => {
      const user = whoIs(req);
      return show(
        res,
        404,
        { title: "Not found", section: "overview" },
        html`<p>No console page at <code>${path}</code>. <a href="/console">Go to the overview</a>.</p>`,
        user ? await allInbox(user) : undefined,
      );
    },
    ({ req, res, path }, allow) =>
      sendText(res, 405, `${req.method ?? ""} is not allowed on ${path} (only ${allow}); use the console's pages and forms`, { Allow: allow }),
  );

  async function overviewPage({ req, res }: ConsoleRequest): Promise<void> {
    const user = whoIs(req)!;
    // With replicas, the page's part and the inbox badge are read from them at once.
    const [o, items] = await Promise.all([allOverview(user), allInbox(user)]);
    return show(res, 200, { title: "Overview", section: "overview" }, overviewBody(o), items);
  }

  async function tasksPage({ req, res, query: q }: ConsoleRequest): Promise<void> {
    const user = whoIs(req)!;
    const filter = { session: q.get("session") ?? undefined, server: q.get("server") ?? undefined, status: q.get("status") ?? undefined };
    const [tasks, items, ended] = await Promise.all([allTasks(user, filter), allInbox(user), endedTasks(user, filter)]);
    const servers = context.registry.names(sourcesFor(user).viewer);
    const live = new Set(tasks.map((t) => t.taskId));
    const history = ended.filter((r) => !live.has(r.taskId!)).slice(0, PAGE_SIZE);
    return show(res, 200, { title: "Tasks", section: "tasks" }, taskListBody(tasks, filter, servers, context.clock.now(), history), items);
  }

  /** How tasks ended, newest first, one record per task (the activity records: they outlive the session). */
  async function endedTasks(user: ConsoleUser, filter: TaskFilter): Promise<ActivityRecord[]> {
    if (filter.status && !ENDED.has(filter.status)) return [];
    const records = await context.store.activity
      .list({
        kind: "task",
        server: filter.server || undefined,
        sessionHash: filter.session || undefined,
        outcome: filter.status || undefined,
        principalHash: user.role === "admin" ? undefined : (user.principal?.hash ?? "-"),
        limit: 500,
      })
      .catch(() => []);
    const seen = new Set<string>();
    return records.filter((r) => r.taskId !== undefined && ENDED.has(r.outcome ?? "") && !seen.has(r.taskId) && seen.add(r.taskId) !== undefined);
  }

  /** What happened (the store's activity records; shared by replicas on one store): an admin everyone's, anyone else their principal's. */
  async function activityPage({ req, res, query: q }: ConsoleRequest): Promise<void> {
    const user = whoIs(req)!;
    const admin = user.role === "admin";
    const field = (name: string) => q.get(name)?.trim() || undefined;
    const kind = field("kind");
    const within = field("within");
    const filter: ActivityFilter = {
      kind: ACTIVITY_KINDS.includes(kind as ActivityKind) ? (kind as ActivityKind) : undefined,
      server: field("server"),
      session: field("session"),
      principal: admin ? field("principal") : undefined,
      outcome: field("outcome"),
      within: within !== undefined && within in WITHIN ? within : undefined,
    };
    const cursor = /^(\d+)\.([\w-]+)$/.exec(q.get("before") ?? "");
    const before = cursor ? { at: Number(cursor[1]), id: cursor[2]! } : undefined;
    const now = context.clock.now();
    const limit = PAGE_SIZE;
    // Anyone but an admin sees only their own principal's records; a person without one (no login) sees none of a principal's.
    const principalHash = admin ? filter.principal : (user.principal?.hash ?? "-");
    const activity = context.activity;
    const [records, items] = await Promise.all([
      context.store.activity.list({
        kind: filter.kind,
        server: filter.server,
        sessionHash: filter.session,
        principalHash,
        outcome: filter.outcome,
        since: filter.within ? now - WITHIN[filter.within]! : undefined,
        before,
        limit: limit + 1,
      }),
      allInbox(user),
    ]);
    const shown = records.slice(0, limit);
    const last = shown.at(-1);
    const body = activityBody({
      records: shown,
      filter,
      kinds: ACTIVITY_KINDS,
      servers: context.registry.names(sourcesFor(user).viewer),
      admin,
      next: records.length > limit && last ? pageQuery(filter, last) : undefined,
      paged: before !== undefined,
      enabled: activity?.enabled ?? false,
      lost: admin ? (activity?.dropped ?? 0) + (activity?.failed ?? 0) : 0,
      now,
    });
    return show(res, 200, { title: "Activity", section: "activity" }, body, items);
  }

  /** Each server the asker may see: its check, this replica's sessions' connections to it, and its tools' recorded calls (last 24 h). */
  async function upstreamsPage({ req, res }: ConsoleRequest): Promise<void> {
    const user = whoIs(req)!;
    const mine = sourcesFor(user);
    const now = context.clock.now();
    const sessions = context.sessions.list().filter((s) => !s.isClosed && (mine.sees?.(s) ?? true));
    const rows = context.registry.list(mine.viewer).map((entry): UpstreamRow => ({
      name: entry.name,
      transport: describeTarget(entry.config).transport,
      check: context.activity?.checks.get(entry.name),
      reconnect: live.reconnects.get(entry.name),
      stderr: sessions.map((s) => s.view(entry.name).stderr ?? []).find((lines) => lines.length > 0) ?? [],
      connections: sessions.flatMap((s) => {
        const view = s.view(entry.name);
        if (view.status === "not_connected") return [];
        return [{ sessionRef: sessionHash(s.id), status: view.status, connectedAt: view.connectedAt, lastError: view.lastError }];
      }),
    }));
    const principalHash = user.role === "admin" ? undefined : (user.principal?.hash ?? "-");
    const day = 24 * 3_600_000;
    const stats = new Map(
      await Promise.all(
        rows.map(async (r) => {
          const records = await context.store.activity.list({ kind: "tool_call", server: r.name, principalHash, since: now - day, limit: STATS_RECORDS });
          return [r.name, { tools: toolStats(records), hourly: callsOver(records, now, day, 24) }] as const;
        }),
      ),
    );
    const items = await allInbox(user);
    return show(res, 200, { title: "Upstreams", section: "upstreams" }, upstreamsBody(rows, stats, now, context.activity?.enabled ?? false), items);
  }

  async function inboxPage({ req, res, query }: ConsoleRequest): Promise<void> {
    const user = whoIs(req)!;
    const items = await describeInbox(sourcesFor(user), await allInbox(user));
    return show(res, 200, { title: "Inbox", section: "inbox" }, inboxBody(items, context.clock.now(), inboxNotice(query)), items);
  }

  /** Pending approvals (docs/adr/0025): admins decide, others see them read-only. */
  async function approvalsPage({ req, res, query }: ConsoleRequest, status = 200, error?: { id: string; message: string }): Promise<void> {
    const user = whoIs(req)!;
    const records = context.approvalRecords;
    if (!records) {
      return show(
        res,
        404,
        { title: "Approvals", section: "approvals" },
        html`<p>Approvals need gateway.governance (profile enforce) with an approve rule.</p>`,
      );
    }
    const [list, items] = await Promise.all([records.listForConsole(), allInbox(user)]);
    const done = query.get("decided");
    const notice = done
      ? `Approval ${done} ${query.get("state") === "approved" ? "approved: the call runs now" : "denied: the call fails with your reason"}.`
      : undefined;
    return show(
      res,
      status,
      { title: "Approvals", section: "approvals" },
      approvalsBody({ ...list, canDecide: user.role === "admin", notice, error }, context.clock.now()),
      items,
    );
  }

  /** An approver's decision: admins only; never the requester's own call (unless allowSelfApproval); the first decision wins. */
  async function decide(r: ConsoleRequest): Promise<void> {
    const { req, res, params } = r;
    const id = params.id!;
    const user = whoIs(req)!;
    const records = context.approvalRecords;
    if (!records) return approvalsPage(r, 404);
    if (user.role !== "admin") {
      return show(
        res,
        403,
        { title: "Not allowed", section: "approvals" },
        html`<p>Your console role (${user.role}) may not decide approvals; approvers are console admins (docs/adr/0025).</p>`,
      );
    }
    const form = await readForm(req, maxBody);
    const action = form.get("action");
    const reason = (form.get("reason") ?? "").trim().slice(0, 500);
    if (action !== "approve" && action !== "deny") return approvalsPage(r, 400, { id, message: "Choose Approve or Deny." });
    // The static token's operator is the one person who holds the token: the static-token caller's own call is theirs.
    const principal = user.principal ?? (token !== undefined ? OPERATOR : undefined);
    try {
      const decided = await records.decide(id, { principal, name: user.principal?.subject ?? "operator" }, action === "approve" ? "approve" : "reject", reason);
      context.logger.info(
        { action: "decide", approvalId: id, state: decided.state, principalHash: principal?.hash ?? "operator", role: user.role },
        "console_action",
      );
      context.auditLog?.consoleAction({
        action: "decide",
        at: context.clock.now(),
        principalHash: principal?.hash,
        role: user.role,
        details: { approvalId: id, state: decided.state, server: decided.server, tool: decided.tool },
      });
      context.approvals?.poke();
      return redirect(res, `/console/approvals?decided=${encodeURIComponent(id)}&state=${decided.state}`);
    } catch (err) {
      if (!(err instanceof GatewayError)) throw err;
      return approvalsPage(r, err.code === ErrorCodes.FORBIDDEN ? 403 : 409, { id, message: err.message });
    }
  }

  async function loginPage({ req, res, query }: ConsoleRequest): Promise<void> {
    const next = safeNext(query.get("next"));
    // With OpenID Connect: straight to the provider, unless the static token's form is wanted too (then ?oidc=1 starts it).
    if (oidc && query.get("out") === "1") {
      return show(
        res,
        200,
        { title: "Logged out", section: "login", bare: true },
        html`<p>Logged out. <a href="${CONSOLE_LOGIN_PATH}?oidc=1">Log in again</a></p>`,
      );
    }
    if (oidc && (token === undefined || query.get("oidc") === "1")) {
      const address = req.socket.remoteAddress ?? "unknown";
      const blockedMs = loginStarts.blockedFor(address);
      if (blockedMs !== undefined) {
        const seconds = Math.max(1, Math.ceil(blockedMs / 1000));
        return show(
          res,
          429,
          { title: "Log in", section: "login", bare: true },
          html`<p class="error" role="alert">
            Too many logins started from this address (gateway.console.oidc.maxLoginStartsPerAddress per console.loginWindowMs); try again in ${seconds} s.
          </p>`,
          undefined,
          { "Retry-After": String(seconds) },
        );
      }
      loginStarts.failed(address); // counts this start
      const started = await oidc.start(callbackUrl(req), next);
      return redirect(res, started.url.href, { "Set-Cookie": bindingCookie(started.binding, oidcSettings.loginTtlMs, cookies) });
    }
    return show(res, 200, { title: "Log in", section: "login", bare: true }, loginBody(safeNext(query.get("next")), token !== undefined));
  }

  async function login({ req, res }: ConsoleRequest): Promise<void> {
    const form = await readForm(req, maxBody);
    const next = safeNext(form.get("next"));
    if (token === undefined) return redirect(res, next);
    // Failed logins per client address (login-limit.ts): the right token too is refused while blocked.
    const address = req.socket.remoteAddress ?? "unknown";
    const blockedMs = logins.blockedFor(address);
    if (blockedMs !== undefined) {
      const seconds = Math.max(1, Math.ceil(blockedMs / 1000));
      const message = `Too many wrong tokens from this address (gateway.console.loginMaxFailures per loginWindowMs); try again in ${seconds} s.`;
      return show(res, 429, { title: "Log in", section: "login", bare: true }, loginBody(next, true, message), undefined, { "Retry-After": String(seconds) });
    }
    if (!secretEquals(form.get("token") ?? "", token)) {
      logins.failed(address);
      return show(res, 401, { title: "Log in", section: "login", bare: true }, loginBody(next, true, "That is not the gateway's token; try again."));
    }
    logins.succeeded(address);
    redirect(res, next, { "Set-Cookie": loginCookie(token, cookies) });
  }

  async function cancel({ req, res, params }: ConsoleRequest): Promise<void> {
    const taskId = params.id!;
    const user = whoIs(req)!;
    if (user.role === "viewer") return forbidden(res, "cancel tasks");
    const scope = scopeOf(user);
    const here = await cancelHere(taskId, user);
    const there = here.outcome === "not_here" && remote && scope ? await remote.act<CancelOutcome>(`${CLUSTER_PREFIX}cancel`, { taskId }, scope) : undefined;
    const outcome = there === undefined || there === "unreachable" ? (there ?? here) : there.value;
    audit(user, "cancel", { taskId, outcome: outcome === "unreachable" ? outcome : outcome.outcome, replica: replicaOf(there) });
    if (outcome === "unreachable") return sendText(res, 502, `a replica did not answer; task ${taskId} may be held there: try again`);
    if (outcome.outcome !== "not_here") return redirect(res, `/console/tasks/${encodeURIComponent(taskId)}?cancel=${outcome.outcome}`);
    if (!(await anyTask(user, taskId))) return taskNotFound(res, taskId, await allInbox(user));
    return sendText(res, 502, `task ${taskId} is held by another replica that did not answer the cancel; try again`);
  }

  async function taskPage({ req, res, params, query: q }: ConsoleRequest): Promise<void> {
    const taskId = params.id!;
    const user = whoIs(req)!;
    const [found, items] = await Promise.all([anyTask(user, taskId), allInbox(user)]);
    if (!found) {
      // Its session ended: what the activity records tell of it (oldest first), the asker's own only unless admin.
      const principalHash = user.role === "admin" ? undefined : (user.principal?.hash ?? "-");
      const recorded = await context.store.activity.list({ taskId, principalHash, limit: 50 }).catch(() => []);
      if (recorded.length)
        return show(res, 200, { title: `Task ${taskId}`, section: "tasks" }, endedTaskBody(taskId, recorded.reverse(), context.clock.now()), items);
      return taskNotFound(res, taskId, items);
    }
    const notice =
      q.get("cancel") === "ok"
        ? "Task cancelled; the upstream was sent notifications/cancelled."
        : q.get("cancel") === "noop"
          ? "The task had already ended; nothing was cancelled."
          : undefined;
    return show(res, 200, { title: `Task ${taskId}`, section: "tasks" }, taskBody(found, context.clock.now(), notice), items);
  }

  function taskNotFound(res: http.ServerResponse, taskId: string, items?: InboxItem[]): Promise<void> {
    return show(
      res,
      404,
      { title: "Task not found", section: "tasks" },
      html`<p>No task <code>${taskId}</code> in any live session (it may have ended and been deleted). <a href="/console/tasks">All tasks</a></p>`,
      items,
    );
  }

  async function answer({ req, res, params }: ConsoleRequest): Promise<void> {
    const requestId = params.id!;
    const user = whoIs(req)!;
    if (user.role === "viewer") return forbidden(res, "answer requests");
    const scope = scopeOf(user);
    const form = await readForm(req, maxBody);
    // Where the answer goes (told back on the inbox): the request's server and session, read before it is gone.
    const asked = inbox(sourcesFor(user)).find((i) => i.info.requestId === requestId && i.sessionRef === form.get("session"));
    const here = await answerHere(requestId, form, user);
    // A session held by another replica: answered there, through the same path (the first answer wins there too), for this person only.
    const there =
      here.outcome === "not_here" && remote && scope
        ? await remote.act<AnswerOutcome>(`${CLUSTER_PREFIX}answer`, { requestId, form: form.toString() }, scope)
        : undefined;
    const result = there === undefined || there === "unreachable" ? (there ?? here) : there.value;
    audit(user, "answer", { requestId, outcome: result === "unreachable" ? result : result.outcome, replica: replicaOf(there) });
    const gone = `/console/inbox?gone=${encodeURIComponent(requestId)}`;
    if (result === "unreachable") return redirect(res, `${gone}&by=unreachable`);
    switch (result.outcome) {
      case "not_here":
        return redirect(res, `${gone}&by=session`);
      case "gone":
        return redirect(res, `${gone}&by=${encodeURIComponent(result.by)}`);
      case "invalid": {
        const error: InboxError = { requestId, message: result.message, form };
        const items = await allInbox(user);
        return show(res, 400, { title: "Inbox", section: "inbox" }, inboxBody(items, context.clock.now(), undefined, error), items);
      }
      case "answered": {
        const sent = new URLSearchParams({ answered: requestId, action: form.get("action") ?? "" });
        if (asked) sent.set("to", `${asked.info.server} (session ${asked.sessionRef})`);
        return redirect(res, `/console/inbox?${sent.toString()}`);
      }
    }
  }

  /**
   * Every answer and cancel names who did it: the principal's hash (never the subject), or the operator's token; where it ran
   * (`replica`: another replica's id, absent here), and on the replica that ran it for someone logged in elsewhere, `via` that one.
   */
  function audit(user: ConsoleUser, action: "answer" | "cancel", details: Record<string, unknown>): void {
    context.logger.info({ action, principalHash: user.principal?.hash ?? "operator", role: user.role, ...details }, "console_action");
    const ids = Object.fromEntries(Object.entries(details).filter((e): e is [string, string] => typeof e[1] === "string"));
    context.auditLog?.consoleAction({ action, at: context.clock.now(), principalHash: user.principal?.hash, role: user.role, details: ids });
    const target = typeof details.taskId === "string" ? details.taskId : typeof details.requestId === "string" ? details.requestId : "";
    context.activity?.record({
      kind: "console_action",
      outcome: typeof details.outcome === "string" ? details.outcome : "done",
      ...(user.principal ? { principalHash: user.principal.hash } : {}),
      ...(typeof details.taskId === "string" ? { taskId: details.taskId } : {}),
      summary: `${action} ${target} by ${user.principal ? `a ${user.role}` : "the operator (token)"}${typeof details.via === "string" ? ` via ${details.via}` : ""}`,
    });
  }

  /** A person's authorization at an upstream, completed for them only (console/upstream-auth.ts). */
  async function upstreamAuthPage({ req, res, query }: ConsoleRequest): Promise<void> {
    const user = whoIs(req);
    if (!user || !options.upstreamAuth) return show(res, 404, { title: "Not found", section: "overview" }, html`<p>No upstream authorization here.</p>`);
    const person = personOf(user.principal, token !== undefined);
    const done = await completeUpstreamAuth(options.upstreamAuth, query, person);
    const principalHash = user.principal?.hash ?? (token !== undefined ? "operator" : "anonymous");
    if (done.server !== undefined) context.logger.info({ server: done.server, principalHash }, "upstream_authorized");
    else context.logger.warn({ principalHash, reason: done.refused }, "upstream_authorization_refused");
    return show(res, done.status, { title: done.title, section: "overview" }, done.body);
  }

  /** A person's connections to servers with `auth` (console/upstream-auth.ts): list, connect, disconnect; their own only. */
  async function connectionsPage({ req, res }: ConsoleRequest): Promise<void> {
    const user = whoIs(req);
    if (!user || !options.upstreamAuth) return show(res, 404, { title: "Not found", section: "overview" }, html`<p>No upstream connections here.</p>`);
    const person = personOf(user.principal, token !== undefined);
    const [rows, slots] = await Promise.all([options.upstreamAuth.connections(person), options.upstreamAuth.secrets(person)]);
    const now = context.clock.now();
    const body = rows.length === 0 && slots.length > 0 ? secretsBody(slots, now) : html`${connectionsBody(rows, now)}${secretsBody(slots, now)}`;
    return show(res, 200, { title: "Connections", section: "overview" }, body);
  }

  async function changeConnection({ req, res }: ConsoleRequest): Promise<void> {
    const user = whoIs(req);
    if (!user || !options.upstreamAuth) return show(res, 404, { title: "Not found", section: "overview" }, html`<p>No upstream connections here.</p>`);
    const form = await readForm(req, maxBody);
    const server = form.get("server") ?? "";
    const person = personOf(user.principal, token !== undefined);
    const principalHash = user.principal?.hash ?? (token !== undefined ? "operator" : "anonymous");
    const action = form.get("action");
    if (action === "secret-save" || action === "secret-remove") {
      // Per-user secrets (views/connections.ts): the value is sealed and never logged; the log says which slot only.
      const slot = form.get("slot") ?? "";
      try {
        if (action === "secret-save") await options.upstreamAuth.saveSecret(person, server, slot, form.get("value") ?? "");
        else await options.upstreamAuth.removeSecret(person, server, slot);
      } catch (err) {
        return show(res, 400, { title: "Not saved", section: "overview" }, html`<p>${errorMessage(err)}</p>`);
      }
      context.logger.info({ server, slot, principalHash }, action === "secret-save" ? "upstream_secret_saved" : "upstream_secret_removed");
      return redirect(res, CONNECTIONS_PATH);
    }
    if (action === "disconnect") {
      const gone = await options.upstreamAuth.disconnect(person, server);
      context.logger.info({ server, principalHash, disconnected: gone }, "upstream_disconnected");
      return redirect(res, CONNECTIONS_PATH);
    }
    try {
      const url = await options.upstreamAuth.connect(person, server);
      // Not a 303: the console's CSP (form-action 'self') stops a form's redirect to another origin (views/connections.ts).
      return url === undefined ? redirect(res, CONNECTIONS_PATH) : sendConnectContinue(res, server, url);
    } catch (err) {
      return show(res, 400, { title: "Not connected", section: "overview" }, html`<p>${errorMessage(err)}</p>`);
    }
  }

  const replicaOf = (there: { replica: string } | "unreachable" | undefined) => (there === undefined || there === "unreachable" ? undefined : there.replica);

  function forbidden(res: http.ServerResponse, what: string): Promise<void> {
    return show(
      res,
      403,
      { title: "Not allowed", section: "inbox" },
      html`<p>Your console role (viewer) may not ${what}; ask the gateway's operator for the answerer role.</p>`,
    );
  }

  /** Where the provider sends the person back: gateway.console.oidc.redirectUrl, else this gateway's external URL. */
  function callbackUrl(req: http.IncomingMessage): string {
    if (oidcSettings.redirectUrl) return oidcSettings.redirectUrl;
    const base = context.settings.http.publicUrl ?? `http://${req.headers.host ?? "localhost"}`;
    return `${base.replace(/\/$/, "")}${CONSOLE_CALLBACK_PATH}`;
  }

  async function callback({ req, res }: ConsoleRequest): Promise<void> {
    if (!oidc) return sendText(res, 404, "this console has no OpenID Connect login (gateway.console.oidc)");
    let done: Awaited<ReturnType<ConsoleOidc["finish"]>>;
    try {
      done = await oidc.finish(new URL(req.url ?? "/", "http://console.invalid"), req.headers.cookie);
    } catch (err) {
      if (!(err instanceof GatewayError) || err.code !== ErrorCodes.CONSOLE_LOGIN_FAILED) throw err;
      context.logger.warn({ code: err.code, err: err.message }, "console_login_failed");
      return show(
        res,
        400,
        { title: "Login failed", section: "login", bare: true },
        html`<p class="error" role="alert">${err.code}: ${err.message}</p>
          <p><a href="${CONSOLE_LOGIN_PATH}">Log in again</a></p>`,
        undefined,
        { "Set-Cookie": clearBindingCookie(cookies) },
      );
    }
    oidc.end(req); // a session the browser had before is not reused: the cookie is rotated
    context.logger.info({ principalHash: done.user.principal?.hash, role: done.user.role }, "console_login");
    // A 200 page that moves on: the navigation from the provider is cross-site, and a SameSite=Strict cookie set on a redirect of it
    // would not be sent to the next page; a refresh from this (same-site) page sends it.
    sendHtml(
      res,
      200,
      html`<!doctype html>
        <html>
          <head>
            <meta http-equiv="refresh" content="0;url=${done.next}" />
            <title>Logged in</title>
          </head>
          <body>
            <p>Logged in. <a href="${done.next}">Continue to the console</a>.</p>
          </body>
        </html>`,
      { "Set-Cookie": [sessionCookie(done.sessionId, oidcSettings.sessionTtlMs, cookies), clearBindingCookie(cookies)] },
    );
  }

  function logout({ req, res }: ConsoleRequest): void {
    oidc?.end(req);
    redirect(res, CONSOLE_LOGIN_PATH + (oidc && token !== undefined ? "" : "?out=1"), { "Set-Cookie": logoutCookie(cookies) });
  }

  /** With OIDC the guards leave the console's logins to it: a route for the token needs the token or a person's login. */
  function needsLogin(route: Route): Route {
    if (!oidc || route.auth !== "token") return route;
    return {
      ...route,
      handle: (r) => {
        if (whoIs(r.req)) return route.handle(r);
        if ((r.req.method === "GET" || r.req.method === "HEAD") && accepts(r.req.headers.accept, "text/html", { wildcards: false })) {
          return redirect(r.res, `${CONSOLE_LOGIN_PATH}?next=${encodeURIComponent(r.req.url ?? "/console")}`);
        }
        return sendText(r.res, 401, `the console needs a login: log in at ${CONSOLE_LOGIN_PATH}`, { "WWW-Authenticate": 'Bearer realm="emceepee"' });
      },
    };
  }

  return {
    live,
    routes: router.routes,
    start: () => live.start(),
    close: () => {
      unwatchActivity?.();
      live.close();
    },
    handle(req, res, path) {
      if (!isConsolePath(path)) return false;
      Promise.resolve(router.dispatch(req, res, path)).catch((err: unknown) => {
        if (err instanceof FormError) return sendText(res, 400, err.message);
        context.logger.error({ err: errorMessage(err), path }, "console_request_failed");
        if (!res.headersSent) sendText(res, 500, `the console could not do that: ${errorMessage(err)}`);
        else res.end();
      });
      return true;
    },
  };
}

async function answerElicitationForm(session: Session, requestId: string, form: URLSearchParams): Promise<void> {
  const action = form.get("action") ?? "accept";
  if (action !== "accept" && action !== "decline" && action !== "cancel") {
    throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `unknown action '${action}': use the Accept, Decline or Cancel button`);
  }
  const params = session.pending.get("elicitation", requestId).params as { mode?: string; requestedSchema?: RequestedSchema };
  const answer: ElicitationAnswer = { request_id: requestId, action };
  if (action === "accept" && (params.mode ?? "form") === "form") answer.content = formContent(params.requestedSchema ?? {}, form);
  await answerElicitation(session, answer, "console");
}

async function answerSamplingForm(session: Session, requestId: string, form: URLSearchParams): Promise<void> {
  const action = form.get("action") ?? "answer";
  if (action === "reject") {
    const reason = (form.get("reason") ?? "").trim() || "rejected by a person in the web console";
    await answerSampling(session, { request_id: requestId, error: reason, model: "", stop_reason: "" }, "console");
    return;
  }
  if (action !== "answer") throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `unknown action '${action}': use Send reply or Reject`);
  const text = form.get("text") ?? "";
  if (text.trim() === "") throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, "write a reply first (or Reject the request); the request is still pending");
  const model = (form.get("model") ?? "").trim() || "human (emceepee console)";
  await answerSampling(session, { request_id: requestId, text, model, stop_reason: "endTurn" }, "console");
}

function inboxNotice(q: URLSearchParams): string | undefined {
  const answered = q.get("answered");
  if (answered) {
    const to = q.get("to");
    const action = q.get("action");
    return `Answered ${answered}${action ? ` (${action})` : ""}${to ? `: sent to ${to}; the call waiting on it goes on` : ""}.`;
  }
  const gone = q.get("gone");
  if (!gone) return undefined;
  const by = q.get("by");
  if (by === "client") return `${gone} was already answered by its session's client; the first answer wins.`;
  if (by === "console") return `${gone} was already answered in the console; the first answer wins.`;
  if (by === "session") return `${gone}: its session has ended.`;
  if (by === "unreachable") return `${gone} was not answered: a replica that may hold its session did not answer. Try again.`;
  return `${gone} is no longer pending (expired, or withdrawn by its server).`;
}

/** Only console paths of this gateway (no other host, no protocol-relative //). */
function safeNext(next: string | null | undefined): string {
  const path = next?.split("?")[0] ?? "";
  const plain = !/\/\.|\\|%2e|%2f|%5c/i.test(path); // no dot segments or encoded separators that could leave /console
  return next && plain && isConsolePath(path) && path !== CONSOLE_LOGIN_PATH ? next : "/console";
}

function sendAsset(res: http.ServerResponse, asset: Asset): void {
  res.writeHead(200, { ...SECURITY_HEADERS, "Content-Type": asset.type, "Cache-Control": "no-cache" });
  res.end(asset.body);
}
