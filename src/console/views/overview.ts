/** The overview page: upstream servers and sessions, live (with replicas: every replica's sessions, each named with its replica). */
import { age, html, type Html } from "../html.js";
import type { Overview } from "../read-model.js";
import { statusTag } from "./layout.js";

export function overviewBody(o: Overview): Html {
  const cluster = o.replicas !== undefined;
  const servers = o.servers.length
    ? html`<table>
        <caption>
          Upstream servers${o.childProcesses === undefined ? "" : ` (${o.childProcesses} stdio child process${o.childProcesses === 1 ? "" : "es"} running)`}
        </caption>
        <thead>
          <tr>
            <th scope="col">Server</th>
            <th scope="col">Transport</th>
            <th scope="col">Sharing</th>
            <th scope="col">Status in sessions</th>
            <th scope="col">Last error</th>
            <th scope="col">Reconnects</th>
          </tr>
        </thead>
        <tbody>
          ${o.servers.map(
            (s) =>
              html`<tr>
                <th scope="row">${s.name}${s.addedBy !== "config" ? html` <span class="hint">(added at runtime)</span>` : ""}</th>
                <td>${s.transport}</td>
                <td>${s.sharing ?? "per session"}</td>
                <td>
                  ${
                    Object.keys(s.statuses).length
                      ? Object.entries(s.statuses).map(([status, n]) => html`${statusTag(status)} ×${n} `)
                      : html`<span class="hint">no session</span>`
                  }
                </td>
                <td>${s.lastError ? html`<span class="error">${s.lastError}</span>` : "—"}</td>
                <td>${s.reconnect ? html`${s.reconnect.drops} drop(s), last reconnect after ${s.reconnect.attempts} attempt(s)` : "—"}</td>
              </tr>`,
          )}
        </tbody>
      </table>`
    : html`<p>No upstream servers are configured.</p>`;
  const sessions = o.sessions.length
    ? html`<table>
        <caption>
          Sessions (${o.sessions.length})
        </caption>
        <thead>
          <tr>
            <th scope="col">Session</th>
            ${cluster ? html`<th scope="col">Replica</th>` : ""}
            <th scope="col">Face</th>
            <th scope="col">Client</th>
            <th scope="col">Age</th>
            <th scope="col">Idle</th>
            <th scope="col">Working tasks</th>
            <th scope="col">Pending requests</th>
          </tr>
        </thead>
        <tbody>
          ${o.sessions.map(
            (s) =>
              html`<tr>
                <th scope="row">
                  <a href="/console/tasks?session=${s.ref}"><code>${s.ref}</code></a>
                </th>
                ${cluster ? html`<td><code>${s.replica ?? ""}</code></td>` : ""}
                <td>${s.face}</td>
                <td>${s.client}</td>
                <td>${age(s.createdAt, o.now)}</td>
                <td>${age(s.lastActivityAt, o.now)}</td>
                <td>${s.workingTasks}</td>
                <td>${s.pending ? html`<a href="/console/inbox">${s.pending}</a>` : "0"}</td>
              </tr>`,
          )}
        </tbody>
      </table>`
    : html`<p>No sessions.</p>`;
  const replicas = cluster
    ? html`<p class="hint" id="replicas">
        Replicas: ${(o.replicas ?? []).map((r, i) => html`${i ? ", " : ""}<code>${r}</code>${i === 0 ? " (this one)" : ""}`)}
      </p>`
    : "";
  const unreachable = o.unreachable?.length
    ? html`<p class="error" role="alert">
        Not answering, their sessions are not shown: ${o.unreachable.map((r, i) => html`${i ? ", " : ""}<code>${r}</code>`)}
      </p>`
    : "";
  return html`<section id="overview" data-live="replace" aria-live="polite">
    ${replicas}${unreachable}
    <h2>Upstreams</h2>
    ${servers}
    <h2>Sessions</h2>
    ${sessions}
  </section>`;
}
