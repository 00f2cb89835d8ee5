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
 *
 * Compiled at first use (docs/adr/0063): getValidator hands out a validator
 * that compiles its schema (and builds the Ajv instance, and in the bundle
 * evaluates ajv) the first time it validates. The SDK's Client asks for one
 * per tool with an output schema at every tools/list, before any call; the
 * gateway's start-up check and a session's first tools/list thus compile
 * nothing. A schema Ajv cannot compile fails the call that validates against
 * it ("Failed to validate structured content: …" from the SDK's Client, or
 * respond_to_elicitation's error), not the tools/list that brought it; the
 * upstream has run that call (the Client checks its result), and the error is
 * kept, not compiled again. A schema's top-level `$id` is not used: two
 * schemas with one `$id` are two schemas here.
 */
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv-provider.js";
import type { JsonSchemaType, JsonSchemaValidator, jsonSchemaValidator as SchemaValidatorProvider } from "@modelcontextprotocol/sdk/validation/types.js";

/** Distinct schemas compiled by one Ajv instance before it is replaced. */
export const MAX_COMPILED_SCHEMAS = 256;

export class BoundedSchemaValidator implements SchemaValidatorProvider {
  /** Built at the first compile. */
  private ajv: AjvJsonSchemaValidator | undefined;
  /** Schemas compiled by the current Ajv instance. */
  private compiled = 0;
  /** Validators handed out, by the schema's JSON text (compiled or not yet). */
  private readonly validators = new Map<string, JsonSchemaValidator<unknown>>();

  constructor(private readonly max = MAX_COMPILED_SCHEMAS) {}

  /** Distinct schemas compiled by the current Ajv instance. */
  get size(): number {
    return this.compiled;
  }

  getValidator<T>(schema: JsonSchemaType): JsonSchemaValidator<T> {
    const key = JSON.stringify(schema);
    let validator = this.validators.get(key);
    if (!validator) {
      if (this.validators.size >= this.max) this.validators.clear();
      let validate: JsonSchemaValidator<unknown> | undefined;
      validator = (input) => {
        if (!validate) {
          try {
            validate = this.compile(schema);
          } catch (err) {
            // Not compiled again at each call: every call validating against it fails with the same error.
            validate = () => {
              throw err;
            };
          }
        }
        return validate(input);
      };
      this.validators.set(key, validator);
    }
    return validator as JsonSchemaValidator<T>;
  }

  /** Compiles `schema` with the current Ajv instance; a full one is dropped first, with everything it compiled. */
  private compile(schema: JsonSchemaType): JsonSchemaValidator<unknown> {
    if (!this.ajv || this.compiled >= this.max) {
      this.ajv = new AjvJsonSchemaValidator();
      this.compiled = 0;
    }
    // Without its top-level $id: the SDK's provider looks a schema with an $id up in the instance before it compiles
    // (getSchema), and Ajv registers the compiled one under it, so every later schema with that $id — another
    // upstream's, or the same tool's after its tools/list changed — was checked against the first one compiled.
    const { $id: _id, ...anonymous } = schema as JsonSchemaType & { $id?: unknown };
    const validate = this.ajv.getValidator<unknown>(typeof _id === "string" ? anonymous : schema);
    this.compiled++;
    return validate;
  }
}

export const jsonSchemaValidator = new BoundedSchemaValidator();
