/**
 * Secrets are compared in one place: secretEquals (src/auth/secret.ts)
 * compares their SHA-256 hashes in constant time, so neither their content
 * nor their length leaks through timing. The cluster's forwarded-request
 * check uses it; the source is read to prove that no other comparison of
 * secrets (a second timingSafeEqual, which leaks the length when it returns
 * early on a length mismatch) comes back.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { IncomingMessage } from "node:http";
import { Socket } from "node:net";
import path from "node:path";
import { FORWARDED_HEADER, carriesSecret } from "../../src/cluster/forward.js";
import { secretEquals } from "../../src/auth/secret.js";

const SRC = path.resolve(import.meta.dirname, "../../src");

function request(headers: Record<string, string | string[]>): IncomingMessage {
  const req = new IncomingMessage(new Socket());
  req.headers = headers;
  return req;
}

test("carriesSecret accepts the cluster secret and nothing else", () => {
  const secret = "s3cret-of-the-cluster";
  assert.equal(carriesSecret(request({ [FORWARDED_HEADER]: secret }), secret), true);
  assert.equal(carriesSecret(request({ [FORWARDED_HEADER]: "s3cret-of-the-clustex" }), secret), false, "same length, different");
  assert.equal(carriesSecret(request({ [FORWARDED_HEADER]: "s3cret" }), secret), false, "a prefix");
  assert.equal(carriesSecret(request({ [FORWARDED_HEADER]: `${secret}!` }), secret), false, "longer");
  assert.equal(carriesSecret(request({ [FORWARDED_HEADER]: "" }), secret), false, "empty");
  assert.equal(carriesSecret(request({}), secret), false, "absent");
  assert.equal(carriesSecret(request({ [FORWARDED_HEADER]: [secret, secret] }), secret), false, "repeated header");
});

test("secretEquals compares values of any length", () => {
  assert.equal(secretEquals("a", "a"), true);
  assert.equal(secretEquals("a", "ab"), false);
  assert.equal(secretEquals("", ""), true);
  assert.equal(secretEquals("ü", "ü"), true);
});

test("only secretEquals compares secrets with timingSafeEqual (every other place calls it)", () => {
  const files = readdirSync(SRC, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts"));
  const users = files.filter((f) => /\btimingSafeEqual\b/.test(readFileSync(path.join(SRC, f), "utf8")));
  assert.equal(users.length, 1, `timingSafeEqual is used in one file only, not in ${users.join(", ")}`);
  assert.match(readFileSync(path.join(SRC, users[0]!), "utf8"), /export function secretEquals\(/, `${users[0]} defines secretEquals`);
});
