/**
 * The pins page (docs/adr/0029-pinned-tool-definitions.md): each quarantined
 * tool with a line diff of its pinned and its new definition, and an Accept
 * form (plain POST, works without JavaScript; the console's same-origin
 * guard covers it) that pins the new one; then the pinned tools.
 */
import type { PinRecord } from "../../store/contracts.js";
import { canonical } from "../../governance/match.js";
import { age, html, type Html } from "../html.js";

export interface PinsView {
  quarantined: PinRecord[];
  pinned: PinRecord[];
  notice?: string | undefined;
  error?: string | undefined;
}

const pretty = (v: unknown) => JSON.stringify(canonical(v), null, 2).split("\n");

/** A line diff (longest common subsequence); `-` pinned only, `+` new only. Definitions are small; past 2000 lines each, whole blocks. */
export function lineDiff(a: string[], b: string[]): Array<{ op: " " | "-" | "+"; line: string }> {
  if (a.length > 2000 || b.length > 2000) return [...a.map((line) => ({ op: "-" as const, line })), ...b.map((line) => ({ op: "+" as const, line }))];
  const n = a.length;
  const m = b.length;
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--) lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  const out: Array<{ op: " " | "-" | "+"; line: string }> = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      out.push({ op: " ", line: a[i++]! });
      j++;
    } else if (lcs[i + 1]![j]! >= lcs[i]![j + 1]!) out.push({ op: "-", line: a[i++]! });
    else out.push({ op: "+", line: b[j++]! });
  }
  while (i < n) out.push({ op: "-", line: a[i++]! });
  while (j < m) out.push({ op: "+", line: b[j++]! });
  return out;
}

export function pinsBody(v: PinsView, now: number): Html {
  return html`${v.notice ? html`<p class="notice" role="status">${v.notice}</p>` : ""} ${v.error ? html`<p class="error" role="alert">${v.error}</p>` : ""}
    <h2>Quarantined</h2>
    ${v.quarantined.length ? v.quarantined.map((r) => quarantined(r, now)) : html`<p class="hint">No tool changed its definition since it was pinned.</p>`}
    <h2>Pinned</h2>
    ${
      v.pinned.length
        ? html`<table>
            <thead>
              <tr>
                <th scope="col">Server</th>
                <th scope="col">Tool</th>
                <th scope="col">Digest</th>
                <th scope="col">Pinned</th>
              </tr>
            </thead>
            <tbody>
              ${v.pinned.map(
                (r) =>
                  html`<tr>
                    <td><code>${r.server}</code></td>
                    <td><code>${r.tool}</code></td>
                    <td><code title="${r.pinned.digest}">${r.pinned.digest.slice(0, 12)}</code></td>
                    <td>${age(r.pinned.at, now)} ago${r.pinned.by !== undefined ? html` by ${r.pinned.by}` : " (first seen)"}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
        : html`<p class="hint">No tool pinned yet (tools are pinned when first listed).</p>`
    }`;
}

function quarantined(r: PinRecord, now: number): Html {
  const pending = r.pending!;
  const id = `pin-${r.server}-${r.tool}`.replace(/[^A-Za-z0-9_-]/g, "_");
  const diff = lineDiff(pretty(r.pinned.definition), pretty(pending.definition));
  return html`<article class="request pin" id="${id}" aria-labelledby="h-${id}">
    <h3 id="h-${id}"><code>${r.tool}</code> on <span class="server">${r.server}</span></h3>
    <p>
      Pinned <code>${r.pinned.digest.slice(0, 12)}</code> ${age(r.pinned.at, now)} ago; the upstream offers <code>${pending.digest.slice(0, 12)}</code> since
      ${age(pending.at, now)} ago.
    </p>
    <pre class="diff" aria-label="Changes from the pinned definition to the new one">
${diff.map((d) => html`<span class="${d.op === "-" ? "del" : d.op === "+" ? "ins" : "same"}">${d.op} ${d.line}</span>${"\n"}`)}</pre>
    <form method="post" action="/console/pins/accept">
      <input type="hidden" name="server" value="${r.server}" />
      <input type="hidden" name="tool" value="${r.tool}" />
      <input type="hidden" name="digest" value="${pending.digest}" />
      <button type="submit">Accept the new definition</button>
    </form>
  </article>`;
}
