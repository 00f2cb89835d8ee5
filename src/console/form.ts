/**
 * Elicitation forms: the HTML form generated from a form-mode elicitation's
 * `requestedSchema` (MCP's restricted schema: flat object of primitives —
 * strings with formats and lengths, numbers/integers with bounds, booleans,
 * single-select enums as `enum` (+ legacy `enumNames`) or `oneOf` const/title,
 * multi-select arrays of `enum` or `anyOf` items, defaults), and the way back:
 * the posted form turned into the answer's `content`.
 *
 * No validation happens here beyond typing what the browser sent (a number
 * field's text becomes a number when it is one, and stays text when it is
 * not): the content is checked by answerElicitation, the very check
 * respond_to_elicitation makes, so the console accepts exactly what the meta
 * tool accepts and shows its message otherwise.
 */
import { html, type Html } from "./html.js";

/** One property of a requestedSchema, as far as the form uses it. */
export interface FieldSchema {
  type?: string;
  title?: string;
  description?: string;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  enum?: unknown[];
  enumNames?: unknown[];
  oneOf?: Array<{ const?: unknown; title?: string }>;
  anyOf?: Array<{ const?: unknown; title?: string }>;
  items?: FieldSchema;
  minItems?: number;
  maxItems?: number;
  default?: unknown;
}

export interface RequestedSchema {
  type?: string;
  properties?: Record<string, FieldSchema>;
  required?: string[];
}

/** Form control names are this prefix + the property name (the rest of the form is the console's). */
export const FIELD_PREFIX = "f.";

type Content = Record<string, string | number | boolean | string[]>;

/** A schema value (enum member, const, default) as form text. */
function scalar(v: unknown): string {
  return typeof v === "string" || typeof v === "number" || typeof v === "boolean" ? String(v) : JSON.stringify(v);
}

/** The choices of a single- or multi-select property: value and label. */
export function choices(field: FieldSchema): Array<{ value: string; label: string }> | undefined {
  const titled = field.oneOf ?? field.anyOf;
  if (titled) return titled.filter((o) => o.const !== undefined).map((o) => ({ value: scalar(o.const), label: o.title ?? scalar(o.const) }));
  if (field.enum) return field.enum.map((v, i) => ({ value: scalar(v), label: field.enumNames?.[i] !== undefined ? scalar(field.enumNames[i]) : scalar(v) }));
  return undefined;
}

const INPUT_TYPES: Record<string, string> = { email: "email", uri: "url", date: "date" };

/**
 * The controls of a form-mode elicitation, each with its label and
 * description. `values`: what the person posted last (kept after an error);
 * else each property's default. `idPrefix` keeps ids unique on the page.
 */
export function formFields(schema: RequestedSchema, idPrefix: string, values?: URLSearchParams): Html[] {
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties ?? {}).map(([key, field], index) => {
    const id = `${idPrefix}-${index}`;
    const name = FIELD_PREFIX + key;
    const posted = values?.getAll(name);
    const isRequired = required.has(key);
    const label = html`<span class="label">${field.title ?? key}</span>`;
    // Outside the label (its text stays the title); the control's `required` tells assistive technology.
    const mark = isRequired ? html` <span class="req" aria-hidden="true" title="required">*</span>` : "";
    const help = field.description ? html`<span class="help" id="${id}-help">${field.description}</span>` : "";
    const describedBy = field.description ? `${id}-help` : undefined;
    const options = choices(field.type === "array" ? (field.items ?? {}) : field);

    if (field.type === "array" && options) {
      const chosen = new Set(posted ?? (Array.isArray(field.default) ? field.default.map(String) : []));
      const limits = [field.minItems !== undefined ? `at least ${field.minItems}` : "", field.maxItems !== undefined ? `at most ${field.maxItems}` : ""]
        .filter(Boolean)
        .join(", ");
      return html`<fieldset class="field" ${describedBy ? html`aria-describedby="${describedBy}"` : ""}>
        <legend>${label}${mark}${limits ? html` <span class="hint">(choose ${limits})</span>` : ""}</legend>
        ${help}
        ${options.map(
          (o, i) =>
            html`<label class="choice"
              ><input type="checkbox" id="${id}-${i}" name="${name}" value="${o.value}" ${chosen.has(o.value) ? html` checked` : ""} /> ${o.label}</label
            >`,
        )}
      </fieldset>`;
    }
    if (field.type === "boolean") {
      const checked = posted ? posted.includes("true") : field.default === true;
      return html`<div class="field check">
        <input type="hidden" name="${name}" value="false" /><input
          type="checkbox"
          id="${id}"
          name="${name}"
          value="true"
          ${checked ? html` checked` : ""}${describedBy ? html` aria-describedby="${describedBy}"` : ""}
        />
        <label for="${id}">${label}</label>${mark}${help}
      </div>`;
    }
    const value = posted?.[0] ?? (field.default !== undefined && !Array.isArray(field.default) ? scalar(field.default) : "");
    const common = html`id="${id}" name="${name}"${isRequired ? html` required` : ""}${describedBy ? html` aria-describedby="${describedBy}"` : ""}`;
    let control: Html;
    if (options) {
      control = html`<select ${common}>
        ${isRequired ? "" : html`<option value="">(none)</option>`}${options.map(
          (o) => html`<option value="${o.value}" ${o.value === value ? html` selected` : ""}>${o.label}</option>`,
        )}
      </select>`;
    } else if (field.type === "number" || field.type === "integer") {
      const bounds = html`${field.minimum !== undefined ? html` min="${field.minimum}"` : ""}${field.maximum !== undefined ? html` max="${field.maximum}"` : ""}`;
      control = html`<input type="number" step="${field.type === "integer" ? "1" : "any"}" ${bounds} value="${value}" ${common} />`;
    } else {
      const type = INPUT_TYPES[field.format ?? ""] ?? "text";
      const lengths = html`${field.minLength !== undefined ? html` minlength="${field.minLength}"` : ""}${field.maxLength !== undefined ? html` maxlength="${field.maxLength}"` : ""}`;
      const placeholder = field.format === "date-time" ? html` placeholder="2025-01-31T12:00:00Z"` : "";
      control = html`<input type="${type}" ${lengths}${placeholder} value="${value}" ${common} />`;
    }
    return html`<div class="field"><label for="${id}">${label}</label>${mark}${help}${control}</div>`;
  });
}

/**
 * The answer's content from a posted form: each property typed as its schema
 * says — booleans from their checkbox, numbers parsed (text that is no number
 * is kept, for the schema check to reject with its message), multi-selects as
 * arrays — and empty optional fields left out.
 */
export function formContent(schema: RequestedSchema, form: URLSearchParams): Content {
  const required = new Set(schema.required ?? []);
  const content: Content = {};
  for (const [key, field] of Object.entries(schema.properties ?? {})) {
    const name = FIELD_PREFIX + key;
    if (field.type === "boolean") {
      content[key] = form.getAll(name).includes("true");
      continue;
    }
    if (field.type === "array") {
      const chosen = form.getAll(name);
      if (chosen.length > 0 || required.has(key)) content[key] = chosen;
      continue;
    }
    const raw = form.get(name) ?? "";
    if (raw.trim() === "" && !required.has(key)) continue;
    if (field.type === "number" || field.type === "integer") {
      const n = Number(raw.trim());
      content[key] = raw.trim() !== "" && Number.isFinite(n) ? n : raw;
      continue;
    }
    content[key] = raw; // as typed: the answer carries exactly what the person wrote
  }
  return content;
}
