/**
 * Visibility rules about resources and prompts (issue 24, src/governance/match.ts):
 * per principal, per kind, a whole-server rule, tool rules left alone, and the
 * schema refusing a rule about two kinds at once.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { makePrincipal } from "../../src/auth/principal.js";
import { governanceSchema } from "../../src/config/governance.js";
import { isItemVisible, isVisible } from "../../src/governance/match.js";

const alice = makePrincipal({ issuer: "https://idp.example", subject: "alice", scopes: [], claims: { groups: ["admins"] } });
const bob = makePrincipal({ issuer: "https://idp.example", subject: "bob", scopes: [], claims: { groups: ["staff"] } });

const { visibility } = governanceSchema.parse({
  profile: "enforce",
  visibility: [
    { server: "docs", resource: "file:///secret/*", principal: { claims: { groups: "admins" } }, visible: true },
    { server: "docs", resource: "file:///secret/*", visible: false },
    { server: "docs", prompt: "deploy-*", visible: false },
    { server: "docs", tool: "delete", visible: false },
    { server: "vault", visible: false },
  ],
});

test("a resource rule applies per principal, to resources only; a prompt rule to prompts only", () => {
  const res = (principal: typeof alice | undefined, uri: string) => isItemVisible(visibility, true, { principal, server: "docs", kind: "resource", name: uri });
  assert.equal(res(alice, "file:///secret/plan.md"), true);
  assert.equal(res(bob, "file:///secret/plan.md"), false);
  assert.equal(res(undefined, "file:///secret/plan.md"), false);
  assert.equal(res(bob, "file:///public/readme.md"), true);
  assert.equal(isItemVisible(visibility, true, { principal: bob, server: "docs", kind: "prompt", name: "deploy-prod" }), false);
  assert.equal(isItemVisible(visibility, true, { principal: bob, server: "docs", kind: "prompt", name: "summarise" }), true);
  // A prompt named like a hidden resource's glob, a resource like the hidden prompt, and the tool rule: each kind its own.
  assert.equal(isItemVisible(visibility, true, { principal: bob, server: "docs", kind: "resource", name: "deploy-prod" }), true);
  assert.equal(isItemVisible(visibility, true, { principal: bob, server: "docs", kind: "prompt", name: "delete" }), true);
  assert.equal(isVisible(visibility, true, { principal: bob, server: "docs", tool: "deploy-prod" }), true);
  assert.equal(isVisible(visibility, true, { principal: bob, server: "docs", tool: "delete" }), false);
});

test("a rule about none of tool, resource or prompt hides the whole server; visibleByDefault false hides what no rule shows", () => {
  for (const kind of ["resource", "prompt"] as const)
    assert.equal(isItemVisible(visibility, true, { principal: alice, server: "vault", kind, name: "x" }), false);
  assert.equal(isVisible(visibility, true, { principal: alice, server: "vault", tool: "x" }), false);
  assert.equal(isItemVisible([], false, { server: "docs", kind: "prompt", name: "p" }), false);
});

test("a visibility rule about two kinds at once is refused, naming what to do", () => {
  const r = governanceSchema.safeParse({ visibility: [{ server: "docs", tool: "x", prompt: "y", visible: false }] });
  assert.equal(r.success, false);
  assert.match(JSON.stringify(r.error?.issues), /one of tool, resource or prompt/);
});
