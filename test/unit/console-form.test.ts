/**
 * Elicitation forms (src/console/form.ts): the controls generated from a
 * requestedSchema (labels for every control, types, bounds, enums in all
 * three spellings, multi-selects, defaults, everything escaped) and the
 * posted form typed back into content — checked afterwards by the same
 * validator respond_to_elicitation uses (the SDK's Ajv), as the console does.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { formContent, formFields, type RequestedSchema } from "../../src/console/form.js";

const SCHEMA: RequestedSchema = {
  type: "object",
  properties: {
    name: { type: "string", title: "Name", description: "Your <b>full</b> name", minLength: 2, maxLength: 40 },
    email: { type: "string", format: "email", title: "Email" },
    agree: { type: "boolean", title: "Agree", default: true },
    age: { type: "integer", title: "Age", minimum: 0, maximum: 150, default: 30 },
    ratio: { type: "number", title: "Ratio", minimum: 0, maximum: 1 },
    color: { type: "string", title: "Color", enum: ["r", "g"], enumNames: ["Red", "Green <x>"] },
    hero: {
      type: "string",
      title: "Hero",
      oneOf: [
        { const: "h1", title: "Superman" },
        { const: "h2", title: "Batman" },
      ],
      default: "h2",
    },
    tools: {
      type: "array",
      title: "Tools",
      minItems: 1,
      items: {
        anyOf: [
          { const: "a", title: "Awl" },
          { const: "b", title: "Brush" },
        ],
      },
      default: ["b"],
    },
    plain: { type: "array", title: "Plain", items: { type: "string", enum: ["x", "y"] } },
  },
  required: ["name", "tools"],
};

/** The markup with whitespace collapsed and void tags as `>` (the templates are formatted by Prettier). */
function norm(parts: readonly { value: string }[]): string {
  return parts
    .map((p) => p.value)
    .join(" ")
    .replace(/\s+/g, " ")
    .replace(/\s*\/>/g, ">")
    .replace(/ +>/g, ">");
}

const markup = () => norm(formFields(SCHEMA, "f-req1"));

test("every control has a label (for=id, or a fieldset legend with labelled checkboxes), and descriptions are attached", () => {
  const html = markup();
  const ids = [...html.matchAll(/<(?:input|select|textarea)(?![^>]*type="hidden")[^>]*\bid="([^"]+)"/g)].map((m) => m[1]!);
  assert.equal(ids.length, 2 + 1 + 2 + 2 + 2 + 2, "name, email, agree, age, ratio, color, hero, 2 tools, 2 plain");
  for (const id of ids) {
    const labelled = html.includes(`for="${id}"`) || new RegExp(`<label class="choice"><input[^>]*id="${id}"`).test(html);
    assert.ok(labelled, `control ${id} has a label`);
  }
  assert.match(html, /aria-describedby="f-req1-0-help"/);
});

test("types, bounds, enums (enum+enumNames, oneOf, anyOf items), defaults and required are in the markup; text is escaped", () => {
  const html = markup();
  assert.match(html, /<input type="text" minlength="2" maxlength="40" value="" id="f-req1-0" name="f.name" required/);
  assert.match(html, /<input type="email"/);
  assert.match(html, /type="checkbox" id="f-req1-2" name="f.agree" value="true" checked/);
  assert.match(html, /<input type="number" step="1" min="0" max="150" value="30"/);
  assert.match(html, /<input type="number" step="any" min="0" max="1" value=""/);
  assert.match(html, /<option value="g">Green &lt;x&gt;<\/option>/);
  assert.match(html, /<option value="h2" selected>Batman<\/option>/);
  assert.match(html, /name="f.tools" value="b" checked> Brush/);
  assert.match(html, /name="f.tools" value="a"> Awl/);
  assert.match(html, /Your &lt;b&gt;full&lt;\/b&gt; name/);
  assert.doesNotMatch(html, /<b>/);
});

test("values posted after a refusal are shown again instead of the defaults", () => {
  const posted = new URLSearchParams([
    ["f.name", 'A"><script>'],
    ["f.age", "200"],
    ["f.tools", "a"],
  ]);
  const html = norm(formFields(SCHEMA, "f-req1", posted));
  assert.match(html, /value="A&quot;&gt;&lt;script&gt;"/);
  assert.match(html, /value="200"/);
  assert.match(html, /value="a" checked/);
  assert.doesNotMatch(html, /value="b" checked/);
});

test("the posted form becomes typed content; the gateway's validator then accepts it or says what is wrong", () => {
  const form = new URLSearchParams([
    ["f.name", " Ada "],
    ["f.email", ""],
    ["f.agree", "false"],
    ["f.age", "41"],
    ["f.ratio", ""],
    ["f.color", "g"],
    ["f.hero", "h1"],
    ["f.tools", "a"],
    ["f.tools", "b"],
  ]);
  const content = formContent(SCHEMA, form);
  assert.deepEqual(
    content,
    { name: " Ada ", agree: false, age: 41, color: "g", hero: "h1", tools: ["a", "b"] },
    "text as typed; empty optional fields left out",
  );
  const validate = new AjvJsonSchemaValidator().getValidator(SCHEMA);
  assert.equal(validate(content).valid, true);

  const bad = formContent(
    SCHEMA,
    new URLSearchParams([
      ["f.name", "Ada"],
      ["f.age", "old"],
    ]),
  );
  assert.deepEqual(
    bad,
    { name: "Ada", agree: false, age: "old", tools: [] },
    "text that is no number is kept for the validator to refuse; a required multi-select is sent empty",
  );
  const check = validate(bad);
  assert.equal(check.valid, false);
  assert.match(check.errorMessage ?? "", /age must be integer|tools must NOT have fewer than 1 items/);
});
