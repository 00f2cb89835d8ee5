/**
 * One JSON Schema validator (the SDK's Ajv provider) for every face's SDK
 * server: each Server would otherwise build its own Ajv instance, about 1 ms
 * of CPU per session opened (measured by bench/fan-in.bench.ts). Ajv keeps
 * no per-session state; compiled schemas are cached by the schema object.
 */
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv-provider.js";

export const jsonSchemaValidator = new AjvJsonSchemaValidator();
