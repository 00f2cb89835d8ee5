/**
 * OpenTelemetry tracing, off unless configured. The standard environment
 * turns it on: OTEL_TRACES_EXPORTER (other than "none"),
 * OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT. Then
 * one Node tracer provider is started per process (sdk-trace-node, batch
 * processor: OTEL_BSP_*), exporting as OTEL_TRACES_EXPORTER says: `otlp`
 * (default) over OTLP/HTTP, protobuf or JSON as
 * OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL says (the exporters read endpoint,
 * headers and timeout from the environment themselves), or `console`;
 * gRPC is not bundled (a warning says so, and traces go over http/protobuf).
 * The resource is OTEL_SERVICE_NAME (default "emceepee") plus
 * OTEL_RESOURCE_ATTRIBUTES. Not @opentelemetry/sdk-node: it bundles every
 * exporter (gRPC, Zipkin, Prometheus…) and an install script with them
 * (docs/adr/0011-observability.md). shutdown() flushes.
 * An injected TracerProvider (tests, embedders) is used as given and never
 * shut down here. Either way the active context follows async calls
 * (context-manager.ts). Off, the gateway has no tracer and its taps skip spans.
 */
import { createRequire } from "node:module";
import type { Tracer, TracerProvider } from "@opentelemetry/api";
import type * as OtlpHttp from "@opentelemetry/exporter-trace-otlp-http";
import type * as OtlpProto from "@opentelemetry/exporter-trace-otlp-proto";
import type * as Resources from "@opentelemetry/resources";
import type * as SdkBase from "@opentelemetry/sdk-trace-base";
import type { SpanExporter } from "@opentelemetry/sdk-trace-base";
import type * as SdkNode from "@opentelemetry/sdk-trace-node";
import { installContextManager } from "./context-manager.js";

// The SDK and exporters (CommonJS) are required only when tracing is on: a process without it does not load them (docs/adr/0017-lazy-start.md).
const require = createRequire(import.meta.url);

export interface Tracing {
  /** Undefined while tracing is off. */
  readonly tracer: Tracer | undefined;
  /** Flushes and stops what this module started (an injected provider is the caller's). */
  shutdown(): Promise<void>;
}

/** Whether the OTEL_* environment asks for traces. */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  const exporter = env.OTEL_TRACES_EXPORTER?.trim();
  if (exporter) return exporter !== "none";
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

let sdk: SdkNode.NodeTracerProvider | undefined;
let users = 0;

/**
 * Tracing for one gateway: `provider` when given, else the Node SDK when the
 * environment asks for it, else off.
 */
export function setUpTracing(options: {
  provider?: TracerProvider | undefined;
  version: string;
  env?: NodeJS.ProcessEnv;
  /** Where a configuration that cannot be honoured as given is reported. */
  warn?: ((message: string) => void) | undefined;
}): Tracing {
  if (options.provider) {
    installContextManager();
    return { tracer: options.provider.getTracer("emceepee", options.version), shutdown: async () => undefined };
  }
  if (!tracingConfigured(options.env)) return { tracer: undefined, shutdown: async () => undefined };
  if (!sdk) {
    installContextManager();
    const env = options.env ?? process.env;
    const { detectResources, envDetector, resourceFromAttributes } = require("@opentelemetry/resources") as typeof Resources;
    const { BatchSpanProcessor } = require("@opentelemetry/sdk-trace-base") as typeof SdkBase;
    const { NodeTracerProvider } = require("@opentelemetry/sdk-trace-node") as typeof SdkNode;
    // The environment (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) over the default name.
    const resource = resourceFromAttributes({ "service.name": "emceepee" }).merge(detectResources({ detectors: [envDetector] }));
    sdk = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(spanExporter(env, options.warn))] });
  }
  users++;
  let done = false;
  return {
    // Not the global provider: the gateway hands its tracer to its taps, and a later gateway in the process may start its own.
    tracer: sdk.getTracer("emceepee", options.version),
    async shutdown() {
      if (done) return;
      done = true;
      if (--users > 0 || !sdk) return;
      const stopping = sdk;
      sdk = undefined;
      await stopping.shutdown();
    },
  };
}

/** The exporter OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL ask for. */
export function spanExporter(env: NodeJS.ProcessEnv, warn?: (message: string) => void): SpanExporter {
  if (env.OTEL_TRACES_EXPORTER?.trim() === "console") return new (require("@opentelemetry/sdk-trace-base") as typeof SdkBase).ConsoleSpanExporter();
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL)?.trim() || "http/protobuf";
  if (protocol === "http/json") return new (require("@opentelemetry/exporter-trace-otlp-http") as typeof OtlpHttp).OTLPTraceExporter();
  if (protocol !== "http/protobuf") {
    warn?.(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported by emceepee; traces go over http/protobuf (port 4318). Set http/protobuf or http/json.`);
  }
  return new (require("@opentelemetry/exporter-trace-otlp-proto") as typeof OtlpProto).OTLPTraceExporter();
}
