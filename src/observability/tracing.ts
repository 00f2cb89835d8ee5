/**
 * OpenTelemetry tracing, off unless configured. The standard environment
 * turns it on: OTEL_TRACES_EXPORTER (other than "none"),
 * OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT. Then
 * the OTel Node SDK is started once per process (it reads every other OTEL_*
 * variable: protocol, headers, service name, sampler) and the gateway's spans
 * go through the global tracer provider; shutdown() flushes them.
 * An injected TracerProvider (tests, embedders) is used as given and never
 * shut down here. Either way the active context follows async calls
 * (context-manager.ts). Off, the gateway has no tracer and its taps skip spans.
 */
import { trace, type Tracer, type TracerProvider } from "@opentelemetry/api";
import { NodeSDK } from "@opentelemetry/sdk-node";
import { installContextManager } from "./context-manager.js";

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

let sdk: NodeSDK | undefined;
let users = 0;

/**
 * Tracing for one gateway: `provider` when given, else the Node SDK when the
 * environment asks for it, else off.
 */
export function setUpTracing(options: { provider?: TracerProvider | undefined; version: string; env?: NodeJS.ProcessEnv }): Tracing {
  if (options.provider) {
    installContextManager();
    return { tracer: options.provider.getTracer("emceepee", options.version), shutdown: async () => undefined };
  }
  if (!tracingConfigured(options.env)) return { tracer: undefined, shutdown: async () => undefined };
  if (!sdk) {
    installContextManager();
    sdk = new NodeSDK({ serviceName: process.env.OTEL_SERVICE_NAME ?? "emceepee", instrumentations: [] });
    sdk.start();
  }
  users++;
  let done = false;
  return {
    tracer: trace.getTracer("emceepee", options.version),
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
