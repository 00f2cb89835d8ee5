/** The task list (filterable by session, server and status) and one task's page (arguments, result, cancel). */
import { age, duration, html, type Html } from "../html.js";
import type { TaskFilter, TaskRow } from "../read-model.js";
import { contentBlocks, json } from "./content.js";
import { statusTag } from "./layout.js";

const STATUSES = ["working", "input_required", "completed", "failed", "cancelled", "expired"];

export function taskListBody(tasks: TaskRow[], filter: TaskFilter, servers: string[], now: number): Html {
  const option = (value: string, current: string | undefined) => html`<option value="${value}" ${value === current ? html` selected` : ""}>${value}</option>`;
  const form = html`<form method="get" action="/console/tasks" class="filters" role="search" aria-label="Filter tasks">
    <div class="field">
      <label for="filter-session">Session</label><input id="filter-session" name="session" value="${filter.session ?? ""}" placeholder="any" />
    </div>
    <div class="field">
      <label for="filter-server">Server</label
      ><select id="filter-server" name="server">
        <option value="">any</option>
        ${servers.map((s) => option(s, filter.server))}
      </select>
    </div>
    <div class="field">
      <label for="filter-status">Status</label
      ><select id="filter-status" name="status">
        <option value="">any</option>
        ${STATUSES.map((s) => option(s, filter.status))}
      </select>
    </div>
    <button type="submit">Filter</button>
  </form>`;
  const table = tasks.length
    ? html`<table>
        <caption>
          ${tasks.length} task(s)
        </caption>
        <thead>
          <tr>
            <th scope="col">Task</th>
            <th scope="col">Status</th>
            <th scope="col">Server</th>
            <th scope="col">Tool</th>
            <th scope="col">Session</th>
            <th scope="col">Age</th>
            <th scope="col">TTL</th>
            <th scope="col">Status message</th>
          </tr>
        </thead>
        <tbody>
          ${tasks.map(
            (t) =>
              html`<tr>
                <th scope="row">
                  <a href="/console/tasks/${encodeURIComponent(t.taskId)}"><code>${t.taskId}</code></a>
                </th>
                <td>${statusTag(t.shownStatus)}</td>
                <td>${t.server}</td>
                <td>${t.toolName}</td>
                <td><code>${t.sessionRef}</code></td>
                <td>${age(t.createdAt, now)}</td>
                <td>${duration(t.ttlMs)}</td>
                <td>${t.statusMessage ?? ""}</td>
              </tr>`,
          )}
        </tbody>
      </table>`
    : html`<p>No tasks${filter.session || filter.server || filter.status ? " match the filter" : ""}.</p>`;
  return html`${form}
    <section id="tasks" data-live="replace" aria-live="polite">${table}</section>`;
}

export function taskBody(t: TaskRow, now: number, notice?: string): Html {
  const result = t.result as { content?: unknown; structuredContent?: unknown; isError?: boolean } | undefined;
  const cancel =
    t.status === "working"
      ? html`<form method="post" action="/console/tasks/${encodeURIComponent(t.taskId)}/cancel" class="actions">
          <button type="submit" class="danger">Cancel task</button>
        </form>`
      : "";
  const progress = t.progress
    ? html`<dt>Progress</dt>
        <dd>
          ${t.progress.progress}${t.progress.total !== undefined ? html` / ${t.progress.total}` : ""}${t.progress.message ? html` — ${t.progress.message}` : ""}
        </dd>`
    : "";
  return html`${notice ? html`<p class="notice" role="status">${notice}</p>` : ""}
    <section id="task" data-live="replace" aria-live="polite">
      <dl class="facts">
        <dt>Status</dt>
        <dd>${statusTag(t.shownStatus)}</dd>
        <dt>Server</dt>
        <dd>${t.server}</dd>
        <dt>Tool</dt>
        <dd>${t.toolName}</dd>
        <dt>Session</dt>
        <dd><code>${t.sessionRef}</code></dd>
        <dt>Age</dt>
        <dd>${age(t.createdAt, now)}</dd>
        <dt>TTL</dt>
        <dd>${duration(t.ttlMs)} (expires ${new Date(t.expiresAt).toISOString()})</dd>
        ${
          t.statusMessage
            ? html`<dt>Status message</dt>
                <dd>${t.statusMessage}</dd>`
            : ""
        }
        ${progress}
      </dl>
      ${cancel}
      <h2>Arguments</h2>
      ${json(t.toolArgs)}
      <h2>Result</h2>
      ${
        result
          ? html`${result.isError ? html`<p class="error">The tool reported an error.</p>` : ""}${contentBlocks(result.content)}${
              result.structuredContent !== undefined
                ? html`<h3>Structured content</h3>
                    ${json(result.structuredContent)}`
                : ""
            }`
          : t.error
            ? html`<p class="error">${t.error}</p>`
            : t.resultUpstream
              ? html`<p class="hint">The result stays with the upstream until the client asks for it (tasks/result).</p>`
              : html`<p class="hint">No result yet.</p>`
      }
    </section>`;
}
