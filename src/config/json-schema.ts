/**
 * `emceepee schema`: a JSON Schema (draft 2020-12) of the config file, made
 * from the zod schema that validates it (never written by hand), so an
 * editor completes and checks `emceepee.json` with `"$schema": "<file>"`.
 * A server entry is parsed by hand-written code (server-entry.ts) for its
 * messages; its schema here is the union of the two kinds' key schemas.
 */
import { z } from "zod";
import { configFileSchema } from "./schema.js";
import { serverEntrySchema, serverEntryShapes } from "./server-entry.js";

type JsonSchema = Record<string, unknown>;

const MARKERS = {
  stdio: ["stdio"],
  remote: ["http", "streamable-http", "streamableHttp", "sse"],
} as const;

export function configJsonSchema(): JsonSchema {
  const entry = {
    anyOf: (["stdio", "remote"] as const).map((kind) => kindSchema(kind)),
  };
  const schema = z.toJSONSchema(configFileSchema, {
    io: "input",
    unrepresentable: "any",
    override: (ctx) => {
      if (ctx.zodSchema === (serverEntrySchema as unknown)) Object.assign(ctx.jsonSchema, entry);
    },
  }) as JsonSchema;
  const properties = (schema.properties ?? {}) as Record<string, unknown>;
  return {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    title: "emceepee config",
    description: "mcpServers as Claude Desktop and Cursor write them, plus emceepee's gateway settings (docs/config.md).",
    ...schema,
    properties: { $schema: { type: "string", description: "this schema's location, for editors" }, ...properties },
    // Other clients' keys at the top are ignored with a warning (formats.ts), so they are not errors here.
    additionalProperties: true,
  };
}

function kindSchema(kind: "stdio" | "remote"): JsonSchema {
  const schema = z.toJSONSchema(serverEntryShapes[kind], { io: "input", unrepresentable: "any" }) as JsonSchema;
  delete schema.$schema;
  const properties = { ...(schema.properties as Record<string, JsonSchema>) };
  for (const key of ["type", "transport", "transportType"]) if (key in properties) properties[key] = { enum: [...MARKERS[kind]] };
  // Cursor's envFile is read by loadConfig() before the entry is parsed (config files only).
  if (kind === "stdio") properties.envFile = { type: "string", description: "a KEY=VALUE file merged under env (relative to the config file)" };
  return kind === "remote"
    ? { ...schema, properties, anyOf: [{ required: ["url"] }, { required: ["serverUrl"] }] }
    : { ...schema, properties, required: ["command"] };
}
