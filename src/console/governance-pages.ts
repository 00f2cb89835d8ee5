/**
 * The console's governance pages, admins only: Pins (quarantined tool
 * definitions, accepted with a form: docs/adr/0029) and Audit (the decision
 * records, filtered and paged). createConsole() adds these routes.
 */
import type http from "node:http";
import type { DecisionRecord } from "../store/contracts.js";
import type { GatewayContext } from "../session/gateway-context.js";
import { pinId } from "../governance/pins.js";
import { html, type Html } from "./html.js";
import { readForm, redirect } from "./http.js";
import type { ConsoleUser } from "./oidc.js";
import type { ConsoleRequest, Route } from "./router.js";
import type { PageOptions } from "./views/layout.js";
import { auditBody, auditFilter, auditQuery } from "./views/audit.js";
import { pinsBody } from "./views/pins.js";

/** Decision records on one audit page. */
const AUDIT_PAGE = 50;

export interface GovernancePagesDeps {
  context: GatewayContext;
  whoIs(req: http.IncomingMessage): ConsoleUser | undefined;
  show(res: http.ServerResponse, status: number, o: Omit<PageOptions, "inboxCount" | "canLogOut">, body: Html): Promise<void>;
  maxBody: number;
}

export function governanceRoutes(d: GovernancePagesDeps): Route[] {
  const { context } = d;
  /** Admins only; the others get a 403 page saying so. Undefined when the request is answered already. */
  const admin = async (r: ConsoleRequest, section: "pins" | "audit"): Promise<ConsoleUser | undefined> => {
    const user = d.whoIs(r.req)!;
    if (user.role === "admin") return user;
    await d.show(r.res, 403, { title: "Not allowed", section }, html`<p>Your console role (${user.role}) may not see this page; it is for console admins.</p>`);
    return undefined;
  };
  const off = (r: ConsoleRequest, section: "pins" | "audit") =>
    d.show(
      r.res,
      404,
      { title: section === "pins" ? "Pins" : "Audit", section },
      html`<p>This page needs gateway.governance (profile enforce or dry-run).</p>`,
    );

  async function pinsPage(r: ConsoleRequest, status = 200, error?: string): Promise<void> {
    if (!context.governance) return off(r, "pins");
    if (!(await admin(r, "pins"))) return;
    const all = await context.store.pins.list();
    const accepted = r.query.get("accepted");
    await d.show(
      r.res,
      status,
      { title: "Pins", section: "pins" },
      pinsBody(
        {
          quarantined: all.filter((p) => p.pending),
          pinned: all,
          notice: accepted ? `Accepted the new definition of ${accepted}: it is pinned now.` : undefined,
          error:
            error ??
            (context.governance.pins.mode === "off" ? "Pinning is off (gateway.governance.pins.mode): nothing new is pinned or quarantined." : undefined),
        },
        context.clock.now(),
      ),
    );
  }

  async function accept(r: ConsoleRequest): Promise<void> {
    const governance = context.governance;
    if (!governance) return off(r, "pins");
    const user = await admin(r, "pins");
    if (!user) return;
    const form = await readForm(r.req, d.maxBody);
    const server = form.get("server") ?? "";
    const tool = form.get("tool") ?? "";
    const digest = form.get("digest") ?? "";
    if (!server || !tool || !/^[0-9a-f]{64}$/.test(digest)) return pinsPage(r, 400, "The form lacks the server, tool or digest; accept from the Pins page.");
    const by = user.principal?.subject ?? "operator";
    // The faces whose tool list this changes are told (tools/list_changed), as on a reload.
    const accepting = () => governance.pins.accept(server, tool, digest, by);
    const done = context.toolViews ? (await context.toolViews.around(accepting)).result : await accepting();
    if (!done)
      return pinsPage(r, 409, `The definition of '${tool}' on '${server}' is no longer the one waiting (accepted already, or changed again); look again.`);
    const record: DecisionRecord = {
      id: context.newId(),
      at: context.clock.now(),
      outcome: "allow",
      profile: "enforce",
      decidedBy: "rule",
      ...(user.principal ? { principalHash: user.principal.hash } : {}),
      face: "console",
      server: server,
      tool: tool,
      argumentsDigest: digest,
      ruleId: pinId(server, tool),
      policyVersion: governance.policyVersion ?? "",
      approval: { id: `${pinId(server, tool)}@${digest.slice(0, 12)}`, by, reason: "accepted the new tool definition" },
    };
    await governance.note(record);
    context.logger.info({ action: "accept_pin", server, tool, digest, principalHash: user.principal?.hash ?? "operator", role: user.role }, "console_action");
    context.auditLog?.consoleAction({
      action: "accept_pin",
      at: context.clock.now(),
      principalHash: user.principal?.hash,
      role: user.role,
      details: { server, tool, digest },
    });
    redirect(r.res, `/console/pins?accepted=${encodeURIComponent(`${tool} on ${server}`)}`);
  }

  async function auditPage(r: ConsoleRequest): Promise<void> {
    if (!context.governance) return off(r, "audit");
    if (!(await admin(r, "audit"))) return;
    const { filter, before, problems } = auditFilter(r.query);
    // The store filters and pages (newest first); one more than a page says whether an Older link is due.
    const matching = await context.store.decisions.query(auditQuery(filter, before, AUDIT_PAGE + 1));
    await d.show(
      r.res,
      problems.length ? 400 : 200,
      { title: "Audit", section: "audit" },
      auditBody({
        filter,
        query: r.query,
        records: matching.slice(0, AUDIT_PAGE),
        later: before !== undefined,
        more: matching.length > AUDIT_PAGE,
        problems,
      }),
    );
  }

  return [
    { method: "GET", path: "/console/pins", auth: "token", handle: (r) => pinsPage(r) },
    { method: "POST", path: "/console/pins/accept", auth: "token", handle: accept },
    { method: "GET", path: "/console/pins/accept", auth: "token", handle: ({ res }) => redirect(res, "/console/pins") },
    { method: "GET", path: "/console/audit", auth: "token", handle: auditPage },
  ];
}
