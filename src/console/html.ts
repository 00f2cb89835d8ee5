/**
 * Safe HTML for the console: every interpolated value is escaped unless it
 * is already Html (made by this module). Tool arguments, results, schemas and
 * messages come from upstreams and clients: untrusted, always escaped.
 */

/** Markup that is safe to emit as is (only this module's functions make it). */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Escapes text for element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

type Value = Html | string | number | boolean | null | undefined | readonly Value[];

function render(value: Value): string {
  if (value instanceof Html) return value.value;
  if (Array.isArray(value)) return (value as readonly Value[]).map(render).join("");
  if (value === null || value === undefined || value === false) return "";
  return escapeHtml(String(value));
}

/** Tagged template: html`<p>${text}</p>` escapes `text`; nested html`` and arrays of it are kept. */
export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0] ?? "";
  values.forEach((v, i) => (out += render(v) + (strings[i + 1] ?? "")));
  return new Html(out);
}

/** A URL for href/src: http(s) only (no javascript:, data: or other schemes from untrusted input); else undefined. */
export function safeLink(url: unknown): string | undefined {
  if (typeof url !== "string") return undefined;
  try {
    const u = new URL(url);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : undefined;
  } catch {
    return undefined;
  }
}

/** "12s", "3m 4s", "2h 5m": a duration for people. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

/** A time shown as its age, kept current by the console's script (data-since). */
export function age(since: number, now: number): Html {
  return html`<time datetime="${new Date(since).toISOString()}" data-since="${since}">${duration(now - since)}</time>`;
}
