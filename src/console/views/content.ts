/**
 * Renders MCP content blocks (a tool result's, or a sampling message's) for
 * people: text as preformatted text, images and audio as data: URLs of their
 * (checked) MIME type, resource links as links (http/https only), embedded
 * resources as their text, anything else as JSON. All of it untrusted: escaped.
 */
import { html, safeLink, type Html } from "../html.js";

const MEDIA_TYPE = /^(image|audio)\/[a-z0-9.+-]+$/i;
const BASE64 = /^[A-Za-z0-9+/=\s]*$/;

export function contentBlocks(blocks: unknown): Html {
  if (!Array.isArray(blocks)) return blocks === undefined ? html`` : json(blocks);
  return html`<div class="blocks">${blocks.map((b) => html`<div class="block">${block(b)}</div>`)}</div>`;
}

export function block(b: unknown): Html {
  if (!b || typeof b !== "object") return json(b);
  const c = b as Record<string, unknown>;
  switch (c.type) {
    case "text":
      return html`<pre class="text">${typeof c.text === "string" ? c.text : ""}</pre>`;
    case "image":
    case "audio": {
      const mime = typeof c.mimeType === "string" ? c.mimeType : "";
      const data = typeof c.data === "string" ? c.data : "";
      if (!MEDIA_TYPE.test(mime) || !mime.toLowerCase().startsWith(c.type) || !BASE64.test(data)) {
        return html`<p class="note">${c.type} block with an unusable MIME type or data (${mime || "none"})</p>`;
      }
      const src = `data:${mime};base64,${data.replace(/\s/g, "")}`;
      return c.type === "image"
        ? html`<img src="${src}" alt="image result (${mime})" class="media" />`
        : html`<audio controls src="${src}" aria-label="audio result (${mime})"></audio>`;
    }
    case "resource_link": {
      const href = safeLink(c.uri);
      const name = typeof c.name === "string" ? c.name : String(c.uri);
      const about = typeof c.description === "string" ? html` — ${c.description}` : "";
      const uri = html`<code>${String(c.uri)}</code>`;
      return href
        ? html`<p class="link">🔗 <a href="${href}" rel="noopener noreferrer" target="_blank">${name}</a> ${uri}${about}</p>`
        : html`<p class="link">🔗 ${name} ${uri}${about}</p>`;
    }
    case "resource": {
      const r = (c.resource ?? {}) as Record<string, unknown>;
      return html`<p class="link">Resource <code>${String(r.uri)}</code>${typeof r.mimeType === "string" ? html` (${r.mimeType})` : ""}</p>
        ${
          typeof r.text === "string"
            ? html`<pre class="text">${r.text}</pre>`
            : html`<p class="note">binary contents, ${typeof r.blob === "string" ? r.blob.length : 0} base64 characters</p>`
        }`;
    }
    default:
      return json(b);
  }
}

export function json(value: unknown): Html {
  return html`<pre class="json">${JSON.stringify(value, null, 2) ?? "undefined"}</pre>`;
}
