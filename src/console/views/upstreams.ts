/**
 * The Upstreams page: per server, its last start-up check, each visible
 * session's connection, reconnects and last error (its stderr tail included
 * for a stdio server that failed), and per tool the calls, error rate and
 * latency percentiles of the recorded activity (gateway.activity) with small
 * server-rendered SVG charts (no script, no CDN; the strict CSP stays).
 */
import { age, html, type Html } from "../html.js";
import type { ReconnectNote } from "../live.js";
import type { CheckNote } from "../../session/activity-log.js";
import type { ActivityRecord } from "../../store/contracts.js";
import { statusTag } from "./layout.js";

export interface UpstreamRow {
  name: string;
  transport: string;
  check: CheckNote | undefined;
  /** Each visible session's connection to it. */
  connections: Array<{ sessionRef: string; status: string; connectedAt?: number | undefined; lastError?: string | undefined }>;
  reconnect: ReconnectNote | undefined;
  /** A stdio server's last stderr lines (bounded: 20 lines of 500 characters), from one of its connections. */
  stderr: readonly string[];
}

export interface ToolStats {
  tool: string;
  calls: number;
  errors: number;
  p50: number;
  p95: number;
  p99: number;
}

/** Per tool, from the tool_call records of one server: counts, errors and exact latency percentiles. */
export function toolStats(records: readonly ActivityRecord[]): ToolStats[] {
  const by = new Map<string, { errors: number; durations: number[] }>();
  for (const r of records) {
    if (r.kind !== "tool_call" || !r.tool) continue;
    const s = by.get(r.tool) ?? { errors: 0, durations: [] };
    if (r.outcome === "error") s.errors++;
    s.durations.push(r.durationMs ?? 0);
    by.set(r.tool, s);
  }
  return [...by.entries()]
    .map(([tool, s]) => {
      const sorted = s.durations.sort((a, b) => a - b);
      const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
      return { tool, calls: sorted.length, errors: s.errors, p50: at(50), p95: at(95), p99: at(99) };
    })
    .sort((a, b) => b.calls - a.calls || (a.tool < b.tool ? -1 : 1));
}

/** Calls per bucket over the window, oldest first (the sparkline's bars). */
export function callsOver(records: readonly ActivityRecord[], now: number, windowMs: number, buckets: number): number[] {
  const counts = new Array<number>(buckets).fill(0);
  const size = windowMs / buckets;
  for (const r of records) {
    if (r.kind !== "tool_call") continue;
    const i = Math.floor((r.at - (now - windowMs)) / size);
    if (i >= 0 && i < buckets) counts[i]!++;
  }
  return counts;
}

/** Bars as an inline SVG (role img, labelled: the numbers are in the table too). */
export function barsSvg(values: readonly number[], label: string, width = 240, height = 36): Html {
  const max = Math.max(1, ...values);
  const w = width / Math.max(1, values.length);
  const bars = values.map((v, i) => {
    const h = Math.round((v / max) * (height - 2));
    return html`<rect x="${(i * w + 1).toFixed(1)}" y="${height - h}" width="${Math.max(1, w - 2).toFixed(1)}" height="${h}"><title>${v}</title></rect>`;
  });
  return html`<svg class="chart" role="img" aria-label="${label}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">${bars}</svg>`;
}

/** A horizontal latency bar: p50 solid, up to p95 lighter (scaled to `max`). */
function latencySvg(s: ToolStats, max: number): Html {
  const width = 120;
  const x50 = Math.round((s.p50 / Math.max(1, max)) * width);
  const x95 = Math.round((s.p95 / Math.max(1, max)) * width);
  return html`<svg class="chart" role="img" aria-label="p50 ${s.p50} ms, p95 ${s.p95} ms" viewBox="0 0 ${width} 10" width="${width}" height="10">
    <rect class="light" x="0" y="1" width="${Math.max(1, x95)}" height="8"></rect>
    <rect x="0" y="1" width="${Math.max(1, x50)}" height="8"></rect>
  </svg>`;
}

export function upstreamsBody(rows: UpstreamRow[], stats: Map<string, { tools: ToolStats[]; hourly: number[] }>, now: number, recording: boolean): Html {
  if (!rows.length) return html`<p>No servers configured.</p>`;
  return html`<section id="upstreams" data-live="replace" aria-live="polite">
    ${rows.map((r) => {
      const s = stats.get(r.name);
      const maxLatency = Math.max(0, ...(s?.tools ?? []).map((t) => t.p95));
      const check = r.check
        ? r.check.ok
          ? html`${statusTag("ok")} ${r.check.tools !== undefined ? html`(${r.check.tools} tools)` : ""} ${age(r.check.at, now)} ago`
          : html`${statusTag("failed")} ${age(r.check.at, now)} ago: <span class="error">${r.check.reason ?? ""}</span>`
        : html`<span class="hint">not checked by this replica</span>`;
      return html`<article class="request upstream" id="upstream-${r.name}" aria-labelledby="upstream-${r.name}-h">
        <h2 id="upstream-${r.name}-h">${r.name} <span class="meta">${r.transport}</span></h2>
        <dl class="facts">
          <dt>Start-up check</dt>
          <dd>${check}</dd>
          <dt>Reconnects</dt>
          <dd>${r.reconnect ? html`${r.reconnect.drops} drop(s), last ${age(r.reconnect.at, now)} ago` : "none"}</dd>
          ${
            r.stderr.length
              ? html`<dt>stderr (last ${r.stderr.length} lines)</dt>
                  <dd><pre class="stderr">${r.stderr.join("\n")}</pre></dd>`
              : ""
          }
          <dt>Calls, last 24 h</dt>
          <dd>
            ${s ? barsSvg(s.hourly, `calls per hour to ${r.name}, last 24 hours: ${s.hourly.join(", ")}`) : html`<span class="hint">${recording ? "none" : "not recorded"}</span>`}
          </dd>
        </dl>
        ${
          r.connections.length
            ? html`<table class="stack">
                <caption>
                  Connections (${r.connections.length})
                </caption>
                <thead>
                  <tr>
                    <th scope="col">Session</th>
                    <th scope="col">State</th>
                    <th scope="col">Connected</th>
                    <th scope="col">Last error</th>
                  </tr>
                </thead>
                <tbody>
                  ${r.connections.map(
                    (c) =>
                      html`<tr>
                        <td data-label="Session">
                          <a href="/console/activity?session=${encodeURIComponent(c.sessionRef)}"><code>${c.sessionRef}</code></a>
                        </td>
                        <td data-label="State">${statusTag(c.status)}</td>
                        <td data-label="Connected">${c.connectedAt !== undefined ? html`${age(c.connectedAt, now)} ago` : ""}</td>
                        <td data-label="Last error">${c.lastError ? html`<code class="error">${c.lastError}</code>` : ""}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
            : html`<p class="hint">No session is connected to it.</p>`
        }
        ${
          s?.tools.length
            ? html`<table class="stack">
                <caption>
                  Tools, last 24 h
                </caption>
                <thead>
                  <tr>
                    <th scope="col">Tool</th>
                    <th scope="col">Calls</th>
                    <th scope="col">Error rate</th>
                    <th scope="col">p50</th>
                    <th scope="col">p95</th>
                    <th scope="col">p99</th>
                    <th scope="col">Latency</th>
                  </tr>
                </thead>
                <tbody>
                  ${s.tools.map(
                    (t) =>
                      html`<tr>
                        <th scope="row" data-label="Tool">${t.tool}</th>
                        <td data-label="Calls">${t.calls}</td>
                        <td data-label="Error rate">${((t.errors / t.calls) * 100).toFixed(1)} %</td>
                        <td data-label="p50">${t.p50} ms</td>
                        <td data-label="p95">${t.p95} ms</td>
                        <td data-label="p99">${t.p99} ms</td>
                        <td data-label="Latency">${latencySvg(t, maxLatency)}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
            : ""
        }
      </article>`;
    })}
  </section>`;
}
