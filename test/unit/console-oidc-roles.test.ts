/** The console's role mapping (src/console/oidc.ts roleOf): one ID token claim, mapped in config; the highest match wins. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { gatewaySettingsSchema } from "../../src/config/schema.js";
import { systemClock } from "../../src/clock.js";
import { ConsoleOidc } from "../../src/console/oidc.js";
import { ErrorCodes, GatewayError } from "../../src/errors.js";
import { createMemoryStore } from "../../src/store/memory/index.js";

const logins = () => createMemoryStore(systemClock).logins;

function oidcWith(oidc: Record<string, unknown>): ConsoleOidc {
  const settings = gatewaySettingsSchema.parse({ console: { oidc: { clientId: "console", issuer: "https://login.example.com", ...oidc } } });
  return new ConsoleOidc(settings.console.oidc, undefined, systemClock, logins);
}

test("the highest mapped role wins; arrays and space-separated strings both count; others get the default", () => {
  const o = oidcWith({ roleClaim: "groups", roles: { admin: ["ops"], answerer: ["dev"], viewer: ["audit"] } });
  assert.equal(o.roleOf({ groups: ["audit", "ops"] }), "admin");
  assert.equal(o.roleOf({ groups: "audit dev" }), "answerer");
  assert.equal(o.roleOf({ groups: ["audit"] }), "viewer");
  assert.equal(o.roleOf({ groups: ["other"] }), "answerer", "defaultRole is answerer");
  assert.equal(o.roleOf({ roles: ["ops"] }), "answerer", "only roleClaim is read");
  assert.equal(o.roleOf({ groups: [1, { ops: true }] }), "answerer", "non-string values are ignored");
});

test('defaultRole "none" refuses a person no value matched', () => {
  const o = oidcWith({ roles: { viewer: ["audit"] }, defaultRole: "none" });
  assert.equal(o.roleOf({ roles: ["nothing"] }), undefined);
  assert.equal(o.roleOf({ roles: ["audit"] }), "viewer");
});

test("console.oidc without an issuer and without auth.oauth.issuers is a config error naming both", () => {
  const settings = gatewaySettingsSchema.parse({ console: { oidc: { clientId: "console" } } });
  assert.throws(
    () => new ConsoleOidc(settings.console.oidc, undefined, systemClock, logins),
    (err: unknown) => err instanceof GatewayError && err.code === ErrorCodes.CONFIG_INVALID && /auth\.oauth\.issuers/.test(err.message),
  );
  assert.equal(gatewaySettingsSchema.safeParse({ console: { oidc: { clientSecret: "s" } } }).success, false, "clientSecret without clientId");
});
