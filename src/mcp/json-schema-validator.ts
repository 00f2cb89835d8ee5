/**
 * One JSON Schema validator (the SDK's Ajv provider) for every face's SDK
 * server, every upstream's SDK client (tool output schemas) and for
 * respond_to_elicitation: each Server or Client would otherwise build its own
 * Ajv instance, about 1 ms of CPU per session opened (measured by
 * bench/fan-in.bench.ts). Ajv keeps no per-session state.
 *
 * Bounded (design LM-1, issue 29): Ajv caches every compiled schema by the
 * schema *object* for good, and each elicitation brings a new object, so a
 * long-running gateway grew by one compiled validator per answered
 * elicitation. Validators are cached here by the schema's JSON text instead
 * (the same form asked again compiles once), at most MAX_COMPILED_SCHEMAS; a
 * full cache starts a fresh Ajv instance and drops the old one with
 * everything it compiled.
 */
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv-provider.js";
import type { JsonSchemaType, JsonSchemaValidator, jsonSchemaValidator as SchemaValidatorProvider } from "@modelcontextprotocol/sdk/validation/types.js";

/** Distinct schemas compiled by one Ajv instance before it is replaced. */
export const MAX_COMPILED_SCHEMAS = 256;

export class BoundedSchemaValidator implements SchemaValidatorProvider {
  private ajv = new AjvJsonSchemaValidator();
  private readonly compiled = new Map<string, JsonSchemaValidator<unknown>>();

  constructor(private readonly max = MAX_COMPILED_SCHEMAS) {}

  /** Distinct schemas compiled by the current Ajv instance. */
  get size(): number {
    return this.compiled.size;
  }

  getValidator<T>(schema: JsonSchemaType): JsonSchemaValidator<T> {
    const key = JSON.stringify(schema);
    let validate = this.compiled.get(key);
    if (!validate) {
      if (this.compiled.size >= this.max) {
        this.compiled.clear();
        this.ajv = new AjvJsonSchemaValidator();
      }
      validate = this.ajv.getValidator<unknown>(schema);
      this.compiled.set(key, validate);
    }
    return validate as JsonSchemaValidator<T>;
  }
}

export const jsonSchemaValidator = new BoundedSchemaValidator();
