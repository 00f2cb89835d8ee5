/**
 * W3C trace context in MCP `params._meta` (the OTel MCP semantic conventions,
 * "Context propagation"): `traceparent`, `tracestate` and `baggage` are read
 * from a request the gateway serves and written into each request it sends
 * upstream, so a client's trace continues through the gateway.
 */
import { createRequire } from "node:module";
import { ROOT_CONTEXT, type Context, type TextMapGetter, type TextMapPropagator, type TextMapSetter } from "@opentelemetry/api";
import type * as OtelCore from "@opentelemetry/core";

type Meta = Record<string, unknown>;

const require = createRequire(import.meta.url);
let w3c: TextMapPropagator | undefined;

/** Made at the first traced request: @opentelemetry/core (CommonJS) is not loaded while tracing is off. */
function propagator(): TextMapPropagator {
  if (w3c) return w3c;
  const { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } = require("@opentelemetry/core") as typeof OtelCore;
  return (w3c = new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }));
}

const getter: TextMapGetter<Meta> = {
  keys: (meta) => Object.keys(meta),
  get: (meta, key) => {
    const value = meta[key];
    return typeof value === "string" ? value : undefined;
  },
};

const setter: TextMapSetter<Meta> = {
  set: (meta, key, value) => {
    meta[key] = value;
  },
};

/** The `_meta` of a JSON-RPC message's params, when it has one. */
export function metaOf(params: unknown): Meta | undefined {
  if (!params || typeof params !== "object") return undefined;
  const meta = (params as { _meta?: unknown })._meta;
  return meta && typeof meta === "object" && !Array.isArray(meta) ? (meta as Meta) : undefined;
}

/** The context a request's `_meta` carries (its trace parent and baggage), on top of `base`. */
export function extractFromMeta(params: unknown, base: Context = ROOT_CONTEXT): Context {
  const meta = metaOf(params);
  return meta ? propagator().extract(base, meta, getter) : base;
}

/**
 * `params` with `ctx`'s trace context written into a copy of its `_meta`
 * (replacing what the caller forwarded); the original is not changed.
 * Unchanged when `ctx` has nothing to propagate.
 */
export function injectIntoParams(params: unknown, ctx: Context): unknown {
  const carrier: Meta = {};
  propagator().inject(ctx, carrier, setter);
  if (Object.keys(carrier).length === 0) return params;
  const base = params && typeof params === "object" ? (params as Meta) : {};
  return { ...base, _meta: { ...metaOf(params), ...carrier } };
}
