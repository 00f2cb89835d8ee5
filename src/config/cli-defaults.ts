/**
 * The defaults `emceepee --help` shows, in a module without zod: the schema
 * (schema.ts) takes them from here, and --help and --version do not load it
 * (docs/adr/0017-lazy-start.md).
 */
export const DEFAULT_HOST = "127.0.0.1";
export const DEFAULT_PORT = 8808;
export const DEFAULT_LOG_LEVEL = "info";
