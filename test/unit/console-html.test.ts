/**
 * What the console renders from untrusted input (tool arguments, results,
 * sampling messages, status messages): escaped text, links only to http(s),
 * media only as data: URLs of a matching image/audio type.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { escapeHtml, html, safeLink } from "../../src/console/html.js";
import type { TaskRow } from "../../src/console/read-model.js";
import { contentBlocks } from "../../src/console/views/content.js";
import { taskBody } from "../../src/console/views/tasks.js";

const EVIL = `<img src=x onerror="alert(1)">'&`;

test("html`` escapes every interpolated value, keeps nested html`` and arrays of it", () => {
  assert.equal(escapeHtml(EVIL), "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&#39;&amp;");
  assert.equal(html`<p title="${EVIL}">${EVIL}</p>`.value, `<p title="${escapeHtml(EVIL)}">${escapeHtml(EVIL)}</p>`);
  const list = html`<ul>
    ${["a<", "b"].map((x) => html`<li>${x}</li>`)}
  </ul>`.value;
  assert.equal(list.replace(/\s+/g, ""), "<ul><li>a&lt;</li><li>b</li></ul>");
  assert.equal(html`${undefined}${null}${false}${0}`.value, "0");
});

test("links only to http(s); media only as data: URLs of their own kind", () => {
  assert.equal(safeLink("javascript:alert(1)"), undefined);
  assert.equal(safeLink("data:text/html,<script>"), undefined);
  assert.equal(safeLink("https://example.com/a?b=<c>"), "https://example.com/a?b=%3Cc%3E");
  const out = contentBlocks([
    { type: "resource_link", uri: "javascript:alert(1)", name: "x" },
    { type: "image", mimeType: "text/html", data: "PHNjcmlwdD4=" },
    { type: "image", mimeType: "image/png", data: "iVBORw0KGgo=" },
    { type: "audio", mimeType: "image/png", data: "AAAA" },
  ]).value;
  assert.doesNotMatch(out, /href="javascript:/);
  assert.doesNotMatch(out, /data:text\/html/);
  assert.match(out, /<img src="data:image\/png;base64,iVBORw0KGgo="/);
  assert.doesNotMatch(out, /<audio/, "an audio block with an image type is not played");
});

test("a task page shows hostile arguments, result and status message as text", () => {
  const task = {
    taskId: "t1",
    sessionId: "secret-session-id",
    sessionRef: "abcd1234",
    server: "srv",
    toolName: `tool${EVIL}`,
    toolArgs: { q: EVIL },
    status: "completed",
    shownStatus: "completed",
    statusMessage: EVIL,
    createdAt: 0,
    lastUpdatedAt: 0,
    ttlMs: 1000,
    expiresAt: 1000,
    result: { content: [{ type: "text", text: EVIL }], structuredContent: { html: EVIL } },
  } satisfies TaskRow;
  const out = taskBody(task, 500).value;
  assert.doesNotMatch(out, /<img/);
  assert.doesNotMatch(out, /secret-session-id/, "the session id (a bearer secret) is never shown");
  assert.ok(out.split("&lt;img src=x onerror=").length >= 5, "arguments, result, structured content, status message and tool name, escaped");
});
