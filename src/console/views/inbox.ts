/**
 * The inbox: every pending elicitation and sampling request of every
 * session, each with the form that answers it. Form mode: the form generated
 * from its requestedSchema (form.ts); URL mode: the link and its message;
 * sampling: the messages and a reply box, or reject. Every control has a
 * label; Enter in a field submits the first button (accept / send).
 * Requests the session's client holds natively are shown read-only.
 */
import { age, duration, html, safeLink, type Html } from "../html.js";
import { formFields, type RequestedSchema } from "../form.js";
import type { InboxItem } from "../read-model.js";
import { contentBlocks } from "./content.js";

/** A failed answer shown at its request: the message and what was posted. */
export interface InboxError {
  requestId: string;
  message: string;
  form: URLSearchParams;
}

export function inboxBody(items: InboxItem[], now: number, notice?: string, error?: InboxError): Html {
  return html`${notice ? html`<p class="notice" role="status">${notice}</p>` : ""}
    <p id="inbox-empty" data-live="replace" class="hint">${items.length ? "" : "Nothing is waiting for an answer."}</p>
    <div id="inbox" data-live="keyed">${items.map((item) => request(item, now, error?.requestId === item.info.requestId ? error : undefined))}</div>`;
}

function request(item: InboxItem, now: number, error: InboxError | undefined): Html {
  const { info, sessionRef } = item;
  const id = info.requestId;
  const heading = info.kind === "sampling" ? "Sampling request" : "Elicitation";
  const hidden = html`<input type="hidden" name="session" value="${sessionRef}" /><input type="hidden" name="kind" value="${info.kind}" />`;
  const alert = error ? html`<p class="error" role="alert" id="err-${id}">${error.message}</p>` : "";
  if (item.forwarded) return forwarded(item, now, heading);
  const body = info.kind === "sampling" ? sampling(item, error) : elicitation(item, error);
  return html`<article class="request" id="req-${id}" data-key="${id}" aria-labelledby="h-${id}">
    <h2 id="h-${id}">${heading} from <span class="server">${info.server}</span></h2>
    <p class="meta">
      session <code>${sessionRef}</code>${item.client ? html` (client ${item.client})` : ""} · received ${age(info.receivedAt, now)} ago ·
      <span title="${new Date(info.expiresAt).toISOString()}">expires in ${duration(info.expiresAt - now)}</span> · <code>${id}</code>
    </p>
    ${causes(item)} ${alert}
    <form method="post" action="/console/inbox/${encodeURIComponent(id)}" class="answer">${hidden}${body}</form>
  </article>`;
}

/** Why it is asked: the tool call(s) of that server waiting on it, linked to their tasks. */
function causes(item: InboxItem): Html {
  if (!item.causes?.length) return html``;
  return html`<p class="cause">
    Asked while running
    ${item.causes.map(
      (c, i) =>
        html`${i ? ", " : ""}<code>${item.info.server}.${c.toolName}</code> (task
          <a href="/console/tasks/${encodeURIComponent(c.taskId)}"><code>${c.taskId}</code></a
          >)`,
    )}
  </p>`;
}

/** A request the client holds natively: what it asks, no form (the client answers it). */
function forwarded({ info, sessionRef }: InboxItem, now: number, heading: string): Html {
  const id = info.requestId;
  const params = info.params as { message?: string; mode?: string; url?: string; requestedSchema?: RequestedSchema; messages?: Array<{ content?: unknown }> };
  const fields = Object.entries(params.requestedSchema?.properties ?? {}).map(([key, f]) => f.title ?? key);
  return html`<article class="request forwarded" id="req-${id}" data-key="${id}" aria-labelledby="h-${id}">
    <h2 id="h-${id}">${heading} from <span class="server">${info.server}</span> <span class="hint">(with the client)</span></h2>
    <p class="meta">session <code>${sessionRef}</code> · sent ${age(info.receivedAt, now)} ago</p>
    <p>Forwarded to the session's own client, which can answer it: shown here read-only until it does.</p>
    ${params.message ? html`<p class="message">${params.message}</p>` : ""}
    ${params.mode === "url" ? html`<p>Link: <code>${String(params.url)}</code></p>` : ""}
    ${fields.length ? html`<p class="hint">Fields: ${fields.join(", ")}</p>` : ""}
    ${params.messages ? html`<div class="messages">${params.messages.map((m) => contentBlocks(Array.isArray(m.content) ? m.content : [m.content]))}</div>` : ""}
  </article>`;
}

function elicitation({ info }: InboxItem, error: InboxError | undefined): Html {
  const params = info.params as { mode?: string; message?: string; url?: string; requestedSchema?: RequestedSchema };
  const message = html`<p class="message">${params.message ?? ""}</p>`;
  const refuse = html`<button type="submit" name="action" value="decline" formnovalidate>Decline</button>
    <button type="submit" name="action" value="cancel" formnovalidate>Cancel</button>`;
  if (params.mode === "url") {
    const href = safeLink(params.url);
    return html`${message}
      <p>
        Open
        ${href ? html`<a href="${href}" rel="noopener noreferrer" target="_blank">${params.url ?? ""}</a>` : html`<code>${String(params.url)}</code> (not an http(s) link)`},
        finish there, then say so here.
      </p>
      <div class="actions"><button type="submit" name="action" value="accept">I completed it</button> ${refuse}</div>`;
  }
  const fields = formFields(params.requestedSchema ?? {}, `f-${info.requestId}`, error?.form);
  return html`${message} ${fields}
    <div class="actions"><button type="submit" name="action" value="accept">Accept</button> ${refuse}</div>`;
}

function sampling({ info }: InboxItem, error: InboxError | undefined): Html {
  const params = info.params as {
    messages?: Array<{ role?: string; content?: unknown }>;
    systemPrompt?: string;
    maxTokens?: number;
    temperature?: number;
  };
  const id = info.requestId;
  const messages = (params.messages ?? []).map(
    (m) => html`<div class="msg"><span class="role">${m.role ?? "?"}</span>${contentBlocks(Array.isArray(m.content) ? m.content : [m.content])}</div>`,
  );
  const reply = error?.form.get("text") ?? "";
  const model = error?.form.get("model") ?? "human (emceepee console)";
  return html`${params.systemPrompt ? html`<p class="message"><span class="label">System prompt:</span> ${params.systemPrompt}</p>` : ""}
    <div class="messages">${messages}</div>
    <p class="hint">max tokens ${params.maxTokens ?? "—"}${params.temperature !== undefined ? html`, temperature ${params.temperature}` : ""}</p>
    <div class="field">
      <label for="s-${id}-text">Your reply (as the assistant)</label><textarea id="s-${id}-text" name="text" rows="4" required>${reply}</textarea>
    </div>
    <div class="field"><label for="s-${id}-model">Model name reported</label><input id="s-${id}-model" name="model" value="${model}" required /></div>
    <div class="field">
      <label for="s-${id}-reason">Reason, if you reject</label><input id="s-${id}-reason" name="reason" value="${error?.form.get("reason") ?? ""}" />
    </div>
    <div class="actions">
      <button type="submit" name="action" value="answer">Send reply</button> <button type="submit" name="action" value="reject" formnovalidate>Reject</button>
    </div>`;
}
