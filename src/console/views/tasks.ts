/**
 * The task list (filterable by session, server and status, with progress bars),
 * one task's page (arguments, result, cancel), and the history: tasks of ended
 * sessions, from the activity records (gateway.activity retention).
 */
import { age, duration, html, type Html } from "../html.js";
import type { TaskFilter, TaskRow } from "../read-model.js";
import type { ActivityRecord } from "../../store/contracts.js";
import { contentBlocks, json } from "./content.js";
import { statusTag } from "./layout.js";

const STATUSES = ["working", "input_required", "completed", "failed", "cancelled", "expired"];

export function taskListBody(tasks: TaskRow[], filter: TaskFilter, servers: string[], now: number, history: ActivityRecord[] = []): Html {
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
                <td data-label="Status">${statusTag(t.shownStatus)} ${t.status === "working" ? progressBar(t) : ""}</td>
                <td data-label="Server">${t.server}</td>
                <td data-label="Tool">${t.toolName}</td>
                <td data-label="Session">
                  <a href="/console/activity?session=${encodeURIComponent(t.sessionRef)}"><code>${t.sessionRef}</code></a>
                </td>
                <td data-label="Age">${age(t.createdAt, now)}</td>
                <td data-label="TTL">${duration(t.ttlMs)}</td>
                <td data-label="Status message">${t.statusMessage ?? t.progress?.message ?? ""}</td>
              </tr>`,
          )}
        </tbody>
      </table>`
    : html`<p>No tasks${filter.session || filter.server || filter.status ? " match the filter" : ""}.</p>`;
  return html`${form}
    <section id="tasks" data-live="replace" aria-live="polite">${table}</section>
    <section id="task-history" data-live="replace" aria-labelledby="task-history-h">
      <h2 id="task-history-h">Ended sessions' tasks</h2>
      ${history.length ? historyTable(history, now) : html`<p class="hint">None recorded${filter.session || filter.server || filter.status ? " that match the filter" : ""}.</p>`}
    </section>`;
}

/** A working task's progress: a bar when the total is known, else the count. */
export function progressBar(t: Pick<TaskRow, "progress">): Html {
  const p = t.progress;
  if (!p) return html``;
  if (p.total !== undefined && p.total > 0)
    return html`<progress class="progress" value="${p.progress}" max="${p.total}" aria-label="progress ${p.progress} of ${p.total}">
      ${p.progress} / ${p.total}
    </progress>`;
  return html`<span class="meta">${p.progress}</span>`;
}

/** How tasks of ended sessions ended (the newest activity record of each). */
function historyTable(records: ActivityRecord[], now: number): Html {
  return html`<table class="stack">
    <caption>
      ${records.length} task(s), newest first
    </caption>
    <thead>
      <tr>
        <th scope="col">Task</th>
        <th scope="col">Ended</th>
        <th scope="col">Server</th>
        <th scope="col">Tool</th>
        <th scope="col">Session</th>
        <th scope="col">When</th>
        <th scope="col">Status message</th>
      </tr>
    </thead>
    <tbody>
      ${records.map(
        (r) =>
          html`<tr>
            <th scope="row" data-label="Task">
              <a href="/console/tasks/${encodeURIComponent(r.taskId ?? "")}"><code>${r.taskId}</code></a>
            </th>
            <td data-label="Ended">${statusTag(r.outcome ?? "")}</td>
            <td data-label="Server">${r.server ?? ""}</td>
            <td data-label="Tool">${r.tool ?? ""}</td>
            <td data-label="Session">${r.sessionHash ? html`<code>${r.sessionHash}</code>` : ""}</td>
            <td data-label="When">${age(r.at, now)} ago</td>
            <td data-label="Status message">${r.summary ?? ""}</td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}

/** A task no live session holds any more: what the activity records tell of it, oldest first. */
export function endedTaskBody(taskId: string, records: ActivityRecord[], now: number): Html {
  const last = records.at(-1)!;
  return html`<p class="hint">Task <code>${taskId}</code> belonged to a session that has ended; its arguments and result went with it. What was recorded:</p>
    <dl class="facts">
      <dt>Status</dt>
      <dd>${statusTag(last.outcome ?? "")}</dd>
      <dt>Server</dt>
      <dd>${last.server ?? ""}</dd>
      <dt>Tool</dt>
      <dd>${last.tool ?? ""}</dd>
      <dt>Session</dt>
      <dd>${last.sessionHash ? html`<a href="/console/activity?session=${encodeURIComponent(last.sessionHash)}"><code>${last.sessionHash}</code></a>` : ""}</dd>
      ${
        last.summary
          ? html`<dt>Status message</dt>
              <dd>${last.summary}</dd>`
          : ""
      }
    </dl>
    <h2>History</h2>
    <ol>
      ${records.map((r) => html`<li>${age(r.at, now)} ago: ${r.kind.replace(/_/g, " ")} ${r.outcome ?? ""}${r.summary ? html` — ${r.summary}` : ""}</li>`)}
    </ol>`;
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
          ${progressBar(t)}
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
