/**
 * Media types read one way (src/mcp/media-type.ts): Content-Type with
 * parameters and any case, Accept with q-values and wildcards; and the
 * console's browser check (src/http/guards.ts), which reads Accept with it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import { checkRequest, type GuardOptions } from "../../src/http/guards.js";
import { accepts, isMediaType, mediaType, parseAccept } from "../../src/mcp/media-type.js";

test("mediaType: type/subtype without parameters, lower-cased; empty when absent", () => {
  assert.equal(mediaType("text/event-stream"), "text/event-stream");
  assert.equal(mediaType("Text/Event-Stream; charset=utf-8"), "text/event-stream");
  assert.equal(mediaType("  application/json ;charset=UTF-8"), "application/json");
  assert.equal(mediaType(undefined), "");
  assert.equal(mediaType(null), "");
  assert.equal(mediaType(""), "");
  assert.equal(mediaType(["application/json", "text/plain"]), "application/json", "a repeated header: the first");
});

test("isMediaType compares the type only, never a substring", () => {
  assert.equal(isMediaType("TEXT/EVENT-STREAM;charset=utf-8", "text/event-stream"), true);
  assert.equal(isMediaType("application/json; profile=text/event-stream", "text/event-stream"), false);
  assert.equal(isMediaType("text/event-streamx", "text/event-stream"), false);
  assert.equal(isMediaType(undefined, "text/event-stream"), false);
});

test("parseAccept: ranges with q-values; malformed ones skipped", () => {
  assert.deepEqual(parseAccept("text/html, application/json;q=0.5, */*;q=0"), [
    { range: "text/html", q: 1 },
    { range: "application/json", q: 0.5 },
    { range: "*/*", q: 0 },
  ]);
  assert.deepEqual(parseAccept("Text/HTML; Q=0.7; level=1"), [{ range: "text/html", q: 0.7 }]);
  assert.deepEqual(parseAccept("html, , text/, /json, text/plain;q=abc"), [{ range: "text/plain", q: 1 }]);
  assert.deepEqual(parseAccept(["text/html", "application/json;q=2"]), [
    { range: "text/html", q: 1 },
    { range: "application/json", q: 1 },
  ]);
  assert.deepEqual(parseAccept(undefined), []);
});

test("accepts: the most specific matching range decides; wildcards count unless turned off", () => {
  assert.equal(accepts("application/json, text/event-stream", "text/event-stream"), true);
  assert.equal(accepts("*/*", "text/html"), true);
  assert.equal(accepts("text/*", "text/html"), true);
  assert.equal(accepts("text/*", "application/json"), false);
  assert.equal(accepts("text/html;q=0, */*", "text/html"), false, "an explicit q=0 refuses");
  assert.equal(accepts("text/*;q=0, text/html", "text/html"), true, "the exact range outranks text/*");
  assert.equal(accepts("TEXT/HTML", "text/html"), true);
  assert.equal(accepts(undefined, "text/html"), true, "no Accept header takes anything");
  assert.equal(accepts("", "text/html"), true);
  assert.equal(accepts("*/*", "text/html", { wildcards: false }), false);
  assert.equal(accepts("text/html,application/xhtml+xml,*/*;q=0.8", "text/html", { wildcards: false }), true);
  assert.equal(accepts(undefined, "text/html", { wildcards: false }), false);
});

const TOKEN = "0123456789abcdef-secret";
const O: GuardOptions = { allowedHosts: [], allowedOrigins: [], token: TOKEN };

function req(headers: IncomingHttpHeaders): IncomingMessage {
  return { method: "GET", url: "/console", headers: { host: "127.0.0.1:8808", ...headers } } as unknown as IncomingMessage;
}

test("the console sends to its login page only a client that asks for HTML by name", () => {
  assert.equal(checkRequest(req({ accept: "text/html,application/xhtml+xml,*/*;q=0.8" }), O)?.status, 303, "a browser's navigation");
  assert.equal(checkRequest(req({ accept: "Text/HTML" }), O)?.status, 303, "any case");
  assert.equal(checkRequest(req({ accept: "*/*" }), O)?.status, 401, "curl: no redirect");
  assert.equal(checkRequest(req({ accept: "text/html;q=0, application/json" }), O)?.status, 401, "HTML refused by q=0");
  assert.equal(checkRequest(req({}), O)?.status, 401);
});
