/**
 * The decision pipeline with real Cedar policies (src/governance/): rules in
 * order, Cedar allow / deny / forbid-over-permit, a malformed policy refused
 * at start and kept out on reload, evaluation errors failing closed, dry-run,
 * and the decision records in a (memory) store.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { makePrincipal, OPERATOR } from "../../src/auth/principal.js";
import { ulidGenerator } from "../../src/clock.js";
import { governanceSchema } from "../../src/config/governance.js";
import { Governance } from "../../src/governance/governance.js";
import { silentLogger } from "../../src/logging.js";
import { openStore } from "../../src/store/open.js";
import { ManualClock } from "../fixtures/manual-clock.js";

const dir = mkdtempSync(path.join(tmpdir(), "gov-"));
let n = 0;
function file(text: string): string {
  const f = path.join(dir, `p${n++}.cedar`);
  writeFileSync(f, text);
  return f;
}

const alice = makePrincipal({ issuer: "https://idp.example", subject: "alice", scopes: [], claims: { groups: ["admins"], level: 3 } });
const bob = makePrincipal({ issuer: "https://idp.example", subject: "bob", scopes: [], claims: { groups: ["staff"] } });

async function make(settings: unknown) {
  const clock = new ManualClock();
  const store = await openStore({ kind: "memory" }, { clock });
  const g = new Governance(governanceSchema.parse({ profile: "enforce", ...(settings as object) }), {
    clock,
    newId: ulidGenerator(clock),
    logger: silentLogger,
    store: () => store,
  });
  await g.start();
  return { g, store };
}

const call = (tool: string, args: Record<string, unknown> = {}, principal = alice) => ({ principal, face: "meta", sessionId: "S1", server: "fs", tool, args });

test("rules: first match wins, argument conditions select, the default applies when none match", async () => {
  const { g, store } = await make({
    rules: [
      { id: "no-etc", server: "fs", tool: "write_*", arguments: [{ pointer: "/path", matches: "^/etc/" }], action: "deny" },
      { id: "writes-ok", server: "fs", tool: "write_*", action: "allow" },
      { id: "staff-no-delete", tool: "delete", principal: { claims: { groups: "staff" } }, action: "deny" },
    ],
    defaultAction: "allow",
  });
  await assert.rejects(g.authorize(call("write_file", { path: "/etc/passwd" })), { code: "EMCP_POLICY_DENIED", message: /rule no-etc/ });
  assert.equal((await g.authorize(call("write_file", { path: "/tmp/x" }))).ruleId, "writes-ok");
  await assert.rejects(g.authorize(call("delete", {}, bob)), { code: "EMCP_POLICY_DENIED" });
  assert.equal((await g.authorize(call("delete", {}, alice))).decidedBy, "default");
  const records = await store.decisions.list();
  assert.deepEqual(
    records.map((r) => [r.outcome, r.ruleId ?? null]),
    [
      ["deny", "no-etc"],
      ["allow", "writes-ok"],
      ["deny", "staff-no-delete"],
      ["allow", null],
    ],
  );
  assert.equal(records[0]!.arguments, undefined, "arguments are not kept unless storeArguments");
  assert.match(records[0]!.argumentsDigest, /^[0-9a-f]{64}$/);
  assert.equal(records[0]!.principalHash, alice.hash);
  assert.match(records[0]!.policyVersion, /^[0-9a-f]{16}$/);
});

test("Cedar: permit allows, no permit denies, forbid overrides permit; the deciding policy ids are recorded", async () => {
  const policyFile = file(`@id("admins-all")
permit(principal, action == Action::"call_tool", resource) when { principal.claims.groups.contains("admins") };
@id("read-for-all")
permit(principal, action == Action::"call_tool", resource) when { resource.name == "read_file" };
@id("no-secrets")
forbid(principal, action, resource) when { context.arguments has path && context.arguments.path like "/secrets/*" };
`);
  const { g } = await make({ defaultAction: "policy", cedar: { policyFile } });
  const ok = await g.authorize(call("write_file", { path: "/tmp/a" }));
  assert.deepEqual([ok.outcome, ok.decidedBy, ok.policyIds], ["allow", "cedar", ["admins-all"]]);
  assert.equal((await g.authorize(call("read_file", {}, bob))).outcome, "allow");
  await assert.rejects(g.authorize(call("write_file", {}, bob)), { code: "EMCP_POLICY_DENIED", message: /none permitted it/ });
  await assert.rejects(g.authorize(call("read_file", { path: "/secrets/key" })), { code: "EMCP_POLICY_DENIED", message: /no-secrets/ });
});

test("Cedar: an evaluation error fails closed, with the error in the record", async () => {
  const policyFile = file(`permit(principal, action, resource);
forbid(principal, action, resource) when { context.arguments.count > 10 };
`);
  const { g, store } = await make({ defaultAction: "policy", cedar: { policyFile } });
  assert.equal((await g.authorize(call("t", { count: 3 }))).outcome, "allow");
  // count is a string here: `>` fails on it; Cedar alone would skip the forbid and allow.
  await assert.rejects(g.authorize(call("t", { count: "many" })), { code: "EMCP_POLICY_DENIED", message: /could not be evaluated/ });
  const last = (await store.decisions.list()).at(-1)!;
  assert.equal(last.outcome, "error");
  assert.match(last.error ?? "", /policy1/);
});

test("a malformed policy is refused at start naming file and line; on reload the old policy is kept", async () => {
  const bad = file(`permit(principal, action, resource);\n\npermit(principal, action resource);\n`);
  const clock = new ManualClock();
  const store = await openStore({ kind: "memory" }, { clock });
  const deps = { clock, newId: ulidGenerator(clock), logger: silentLogger, store: () => store };
  const g0 = new Governance(governanceSchema.parse({ defaultAction: "policy", cedar: { policyFile: bad } }), deps);
  await assert.rejects(g0.start(), (err: Error & { code?: string }) => {
    assert.equal(err.code, "EMCP_CONFIG_INVALID");
    assert.ok(err.message.includes(bad), err.message);
    assert.match(err.message, /line 3/);
    return true;
  });
  const good = file(`forbid(principal, action, resource) when { resource.name == "rm" };\npermit(principal, action, resource);\n`);
  const { g } = await make({ defaultAction: "policy", cedar: { policyFile: good } });
  const before = g.policyVersion;
  const r = await g.reload(governanceSchema.parse({ defaultAction: "policy", cedar: { policyFile: bad } }));
  assert.equal(r.applied, false);
  assert.match(!r.applied ? r.reason : "", /line 3.*is kept/s);
  assert.equal(g.policyVersion, before);
  await assert.rejects(g.authorize(call("rm")), { code: "EMCP_POLICY_DENIED" }, "the old policy still decides");
  const r2 = await g.reload(governanceSchema.parse({ defaultAction: "allow" }));
  assert.equal(r2.applied, true);
  assert.notEqual(g.policyVersion, before);
  assert.equal((await g.authorize(call("rm"))).outcome, "allow");
});

test("a policy that fails validation against its schema is refused", async () => {
  const schemaFile = path.join(dir, "schema.cedarschema");
  writeFileSync(
    schemaFile,
    `entity User { issuer: String, subject: String, claims: {} };\nentity Tool { server: String, name: String };\naction call_tool appliesTo { principal: User, resource: Tool, context: {} };\n`,
  );
  const policyFile = file(`permit(principal, action == Action::"call_tool", resource) when { resource.nope == "x" };\n`);
  const clock = new ManualClock();
  const store = await openStore({ kind: "memory" }, { clock });
  const g = new Governance(governanceSchema.parse({ defaultAction: "policy", cedar: { policyFile, schemaFile } }), {
    clock,
    newId: ulidGenerator(clock),
    logger: silentLogger,
    store: () => store,
  });
  await assert.rejects(g.start(), { code: "EMCP_CONFIG_INVALID", message: /nope/ });
});

test("dry-run lets denied and approval calls through and records would_deny / would_require_approval", async () => {
  const { g, store } = await make({
    profile: "dry-run",
    rules: [
      { id: "deny-rm", tool: "rm", action: "deny" },
      { id: "ask-deploy", tool: "deploy", action: "approve" },
    ],
    audit: { storeArguments: true },
  });
  assert.equal((await g.authorize(call("rm", { a: 1 }))).outcome, "would_deny");
  assert.equal((await g.authorize(call("deploy"))).outcome, "would_require_approval");
  const [first] = await store.decisions.list();
  assert.deepEqual(first!.arguments, { a: 1 });
  assert.equal(first!.profile, "dry-run");
});

test("enforce: approve refuses with EMCP_APPROVAL_REQUIRED naming the rule; visibility hides tools as unknown", async () => {
  const { g, store } = await make({
    rules: [{ id: "ask-deploy", tool: "deploy", action: "approve" }],
    visibility: [
      { server: "fs", tool: "admin_*", principal: { subject: "alice" }, visible: true },
      { server: "fs", tool: "admin_*", visible: false },
    ],
  });
  // A way of calling that cannot wait for an approval (run_code) is refused; the faces that can get the record back (docs/adr/0025).
  await assert.rejects(g.authorize(call("deploy")), { code: "EMCP_APPROVAL_REQUIRED", message: /ask-deploy.*cannot wait/ });
  assert.equal((await store.decisions.list()).at(-1)!.outcome, "approval_required");
  const asked = await g.authorize({ ...call("deploy"), waitsForApproval: true });
  assert.equal(asked.outcome, "approval_required");
  assert.equal(asked.ruleId, "ask-deploy");
  // Post-approval revalidation records nothing and passes an approve.
  const before = await store.decisions.count();
  await g.recheck(call("deploy"));
  assert.equal(await store.decisions.count(), before);
  assert.equal(g.visible(alice, "fs", "admin_reset"), true);
  assert.equal(g.visible(bob, "fs", "admin_reset"), false);
  assert.equal(g.visible(undefined, "fs", "admin_reset"), false);
  assert.equal(g.visible(OPERATOR, "fs", "read"), true);
  await assert.rejects(g.authorize(call("admin_reset", {}, bob)), { code: "EMCP_UNKNOWN_TOOL" });
});

test("config: the policy action needs a Cedar file; a bad regular expression is refused", () => {
  assert.throws(() => governanceSchema.parse({ defaultAction: "policy" }), /governance\.cedar|cedar\.policyFile/);
  assert.equal(governanceSchema.safeParse({ rules: [{ action: "deny", arguments: [{ pointer: "/a", matches: "(" }] }] }).success, false);
});
