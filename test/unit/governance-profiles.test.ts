/**
 * Named profiles (issue 24): principals get a profile by claim match
 * (governance.profileFor); its visibility, rules and mode replace the
 * gateway's for them, others keep the gateway's; decisions record the
 * profile's name; a reload that moves a principal to another profile changes
 * what it sees; the schema refuses a mapping to an unknown profile.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { makePrincipal } from "../../src/auth/principal.js";
import { ulidGenerator } from "../../src/clock.js";
import { governanceSchema } from "../../src/config/governance.js";
import { Governance } from "../../src/governance/governance.js";
import { silentLogger } from "../../src/logging.js";
import { openStore } from "../../src/store/open.js";
import { ManualClock } from "../fixtures/manual-clock.js";

const alice = makePrincipal({ issuer: "https://idp.example", subject: "alice", scopes: [], claims: { groups: ["interns"] } });
const bob = makePrincipal({ issuer: "https://idp.example", subject: "bob", scopes: [], claims: { roles: ["ops"] } });
const carol = makePrincipal({ issuer: "https://idp.example", subject: "carol", scopes: [], claims: {} });

const SETTINGS = {
  profile: "enforce",
  rules: [{ id: "no-deletes", server: "fs", tool: "delete", action: "deny" }],
  profiles: [
    {
      name: "interns",
      visibility: [
        { server: "fs", tool: "write_*", visible: false },
        { server: "fs", prompt: "admin-*", visible: false },
      ],
      rules: [{ id: "interns-read-only", server: "fs", tool: "delete", action: "deny" }],
    },
    { name: "trial", mode: "dry-run", rules: [{ id: "trial-no-read", server: "fs", tool: "read", action: "deny" }] },
  ],
  profileFor: [
    { principal: { claims: { groups: "interns" } }, profile: "interns" },
    { principal: { claims: { roles: "ops" } }, profile: "trial" },
  ],
};

async function make(settings: unknown) {
  const clock = new ManualClock();
  const store = await openStore({ kind: "memory" }, { clock });
  const g = new Governance(governanceSchema.parse(settings), { clock, newId: ulidGenerator(clock), logger: silentLogger, store: () => store });
  await g.start();
  return { g, store };
}

const call = (tool: string, principal: typeof alice) => ({ principal, face: "meta", sessionId: "S1", server: "fs", tool, args: {} });

test("a profile's visibility, rules and mode apply to the principals it is given to, the gateway's to the others; decisions name it", async () => {
  const { g, store } = await make(SETTINGS);
  assert.equal(g.profileOf(alice)?.name, "interns");
  assert.equal(g.profileOf(bob)?.name, "trial");
  assert.equal(g.profileOf(carol), undefined);
  assert.equal(g.profileOf(undefined), undefined);

  // interns: write_* hidden (tools and unknown by name), admin-* prompts hidden; carol sees both.
  assert.equal(g.visible(alice, "fs", "write_file"), false);
  assert.equal(g.visible(carol, "fs", "write_file"), true);
  assert.equal(g.itemVisible(alice, "fs", "prompt", "admin-reset"), false);
  assert.equal(g.itemVisible(carol, "fs", "prompt", "admin-reset"), true);
  await assert.rejects(g.authorize(call("write_file", alice)), { code: "EMCP_UNKNOWN_TOOL" });
  await assert.rejects(g.authorize(call("delete", alice)), { code: "EMCP_POLICY_DENIED", message: /interns-read-only/ });

  // trial (dry-run): a deny is recorded as would_deny and the call goes on; its rules replace the gateway's.
  assert.equal((await g.authorize(call("read", bob))).outcome, "would_deny");
  assert.equal((await g.authorize(call("delete", bob))).outcome, "allow");
  // carol: the gateway's rules, enforced.
  await assert.rejects(g.authorize(call("delete", carol)), { code: "EMCP_POLICY_DENIED", message: /no-deletes/ });
  assert.equal((await g.authorize(call("read", carol))).outcome, "allow");

  const records = await store.decisions.list();
  assert.deepEqual(
    records.map((r) => [r.outcome, r.profile, r.profileName ?? null, r.ruleId ?? null]),
    [
      ["deny", "enforce", "interns", "interns-read-only"],
      ["would_deny", "dry-run", "trial", "trial-no-read"],
      ["allow", "dry-run", "trial", null],
      ["deny", "enforce", null, "no-deletes"],
      ["allow", "enforce", null, null],
    ],
  );
});

test("a reload that gives a principal another profile changes what it sees and the policy version", async () => {
  const { g } = await make(SETTINGS);
  const before = g.policyVersion;
  assert.equal(g.visible(alice, "fs", "write_file"), false);
  const moved = await g.reload(governanceSchema.parse({ ...SETTINGS, profileFor: [{ principal: { subject: "alice" }, profile: "trial" }] }));
  assert.equal(moved.applied, true);
  assert.notEqual(g.policyVersion, before);
  assert.equal(g.profileOf(alice)?.name, "trial");
  assert.equal(g.visible(alice, "fs", "write_file"), true);
});

test("the schema refuses a mapping to an unknown profile, two profiles of one name, and profiles with governance off", () => {
  const unknown = governanceSchema.safeParse({ ...SETTINGS, profileFor: [{ principal: { subject: "x" }, profile: "nope" }] });
  assert.match(JSON.stringify(unknown.error?.issues), /no profile 'nope' in governance.profiles \(have: interns, trial\)/);
  const twice = governanceSchema.safeParse({ ...SETTINGS, profiles: [SETTINGS.profiles[0], SETTINGS.profiles[0]] });
  assert.match(JSON.stringify(twice.error?.issues), /two profiles are named 'interns'/);
  const off = governanceSchema.safeParse({ ...SETTINGS, profile: "off" });
  assert.match(JSON.stringify(off.error?.issues), /profiles apply only when governance.profile/);
});
