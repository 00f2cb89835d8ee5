/**
 * One run_code script in its own QuickJS (WebAssembly) instance: a fresh
 * module, runtime and context per run, so nothing outlives the run and no
 * run sees another's heap (docs/adr/0028-code-mode-sandbox.md). The guest gets
 * only what prelude.ts builds from two host functions (one async call taking
 * and returning JSON strings, one log line); there is no require, process,
 * fetch, timers or module loader. Bounds: memory by the WebAssembly memory's
 * maximum, stack by QuickJS, CPU time and wall time by the interrupt handler
 * and a timer, calls and output here; the first bound crossed ends the run
 * (uncatchable). The engine is loaded when the first run starts.
 */
import type { QuickJSContext, QuickJSDeferredPromise, QuickJSHandle, QuickJSRuntime, QuickJSWASMModule } from "quickjs-emscripten";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import type { Clock } from "../../../clock.js";
import type { CodeModeSettings } from "../../../config/code-mode.js";
import { GUEST_FUNCTIONS, prelude, wrapScript, type GuestFunction } from "./prelude.js";

/** What a host operation failed with, as the guest sees it (an Error with `code`). */
export interface HostFailure {
  code: string;
  message: string;
}

/** The async operations the guest's `mcp` object reaches, by name; the driver counts and bounds them. */
export type HostOps = Partial<Record<GuestFunction, (args: unknown[], signal: AbortSignal) => Promise<unknown>>>;

export type RunLimits = Pick<CodeModeSettings, "wallTimeMs" | "cpuTimeMs" | "memoryBytes" | "stackBytes" | "maxCalls" | "maxOutputBytes">;

export interface LogLine {
  level: "log" | "error";
  text: string;
}

export type RunOutcome =
  | { ok: true; result: unknown; logs: LogLine[] }
  | { ok: false; code: "EMCP_CODE_ERROR" | "EMCP_CODE_LIMIT" | "EMCP_CANCELLED"; message: string; logs: LogLine[] };

export interface RunOptions {
  code: string;
  limits: RunLimits;
  ops: HostOps;
  clock: Clock;
  /** Aborts the run (the client's cancel before promotion, cancel_task after, the session's close). */
  signal: AbortSignal;
}

/** Why a run stops before the script ends: a bound, a cancel, or the host's own refusal. */
interface Stop {
  code: "EMCP_CODE_ERROR" | "EMCP_CODE_LIMIT" | "EMCP_CANCELLED";
  message: string;
}

const SETTING = "gateway.codeMode";
/** Error texts from the guest are cut to this many characters (a deep recursion's stack is megabytes). */
const MAX_ERROR_CHARS = 2_000;

/** The engine's own memory (its static data, C stack and first heap): the module's initial WebAssembly memory. */
const ENGINE_BYTES = 16 * 1024 * 1024;
const WASM_PAGE = 64 * 1024;

/** The parts of WebAssembly used here (the project's TypeScript libs do not declare WebAssembly). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
}
const { Memory, compile } = (
  globalThis as unknown as {
    WebAssembly: { Memory: new (d: { initial: number; maximum: number }) => WasmMemory; compile(this: void, bytes: Uint8Array): Promise<object> };
  }
).WebAssembly;

/**
 * The engine's code, compiled once per process (about 18 ms) and instantiated per run (a run then
 * costs ~4 ms of CPU instead of ~11). Code only: each instance has its own memory and globals.
 * Undefined when the file cannot be found: emscripten then compiles it per run itself.
 */
let compiled: Promise<object | undefined> | undefined;

function engineCode(): Promise<object | undefined> {
  compiled ??= (async () => {
    try {
      // The .wasm file of the build quickjs-emscripten uses, found from that package (it may be nested under it).
      const fromQuickJS = createRequire(createRequire(import.meta.url).resolve("quickjs-emscripten"));
      return await compile(await readFile(fromQuickJS.resolve("@jitl/quickjs-wasmfile-release-sync/wasm")));
    } catch {
      return undefined;
    }
  })();
  return compiled;
}

/**
 * A fresh QuickJS module whose WebAssembly memory cannot grow past its first
 * 16 MiB plus `memoryBytes`: an allocation beyond fails inside QuickJS ("out
 * of memory"). QuickJS's own setMemoryLimit is not used: this build has no
 * malloc_usable_size, so it counts 8 bytes per allocation whatever its size.
 */
async function newModule(memoryBytes: number): Promise<{ module: QuickJSWASMModule; memory: WasmMemory }> {
  const { newQuickJSWASMModule, newVariant, RELEASE_SYNC } = await import("quickjs-emscripten");
  const code = await engineCode();
  const pages = ENGINE_BYTES / WASM_PAGE;
  const memory = new Memory({ initial: pages, maximum: pages + Math.ceil(memoryBytes / WASM_PAGE) });
  // QuickJS's own complaints (an assertion when a run ends in a bad state) would go to the gateway's stderr;
  // the run reports its failure itself, and its module is dropped with it.
  const quiet = { print: () => undefined, printErr: () => undefined } as Record<string, unknown>;
  const variant = newVariant(RELEASE_SYNC, { wasmMemory: memory as never, emscriptenModule: quiet, ...(code ? { wasmModule: code as never } : {}) });
  return { module: await newQuickJSWASMModule(variant), memory };
}

export async function runInSandbox(o: RunOptions): Promise<RunOutcome> {
  const { module, memory } = await newModule(o.limits.memoryBytes);
  const runtime = module.newRuntime();
  const context = runtime.newContext();
  const run = new Run(o, runtime, context, memory);
  try {
    return await run.drive();
  } finally {
    run.dispose();
  }
}

class Run {
  private readonly logs: LogLine[] = [];
  private outputBytes = 0;
  private calls = 0;
  private stop: Stop | undefined;
  private cpuUsedMs = 0;
  private sliceStart: number | undefined;
  private readonly deadline: number;
  private readonly deferreds = new Set<QuickJSDeferredPromise>();
  private readonly inflight = new AbortController();
  private wake: () => void = () => undefined;
  private disposed = false;

  constructor(
    private readonly o: RunOptions,
    private readonly runtime: QuickJSRuntime,
    private readonly context: QuickJSContext,
    private readonly memory: WasmMemory,
  ) {
    this.deadline = o.clock.now() + o.limits.wallTimeMs;
    runtime.setMaxStackSize(o.limits.stackBytes);
    runtime.setInterruptHandler(() => this.shouldInterrupt());
  }

  async drive(): Promise<RunOutcome> {
    const { context } = this;
    this.install();
    const wall = this.o.clock.setTimeout(
      () => this.halt({ code: "EMCP_CODE_LIMIT", message: this.boundMessage("wall time", "wallTimeMs", `${this.o.limits.wallTimeMs} ms`) }),
      this.o.limits.wallTimeMs,
    );
    const onAbort = () => this.halt({ code: "EMCP_CANCELLED", message: `the run was cancelled (${String(this.o.signal.reason ?? "aborted")})` });
    if (this.o.signal.aborted) onAbort();
    this.o.signal.addEventListener("abort", onAbort, { once: true });
    let done: QuickJSHandle | undefined;
    try {
      const setup = this.slice(() => context.evalCode(prelude(this.offered()), "prelude.js"));
      if (setup.error) return this.failed(setup.error, "the sandbox's prelude failed");
      setup.value.dispose();
      const started = this.slice(() => context.evalCode(wrapScript(this.o.code), "script.js"));
      if (started.error) return this.failed(started.error, "the script did not compile");
      done = started.value;
      return await this.loop(done);
    } catch (err) {
      // The host side of the guest failed: V8's own stack (a recursion past what stackBytes lets QuickJS see) or a trap.
      if (this.stop) return this.stopped(this.stop);
      if (err instanceof RangeError) return this.stopped(this.bound("stack"));
      if (this.memoryFull()) return this.stopped(this.bound("memory"));
      return this.stopped({ code: "EMCP_CODE_ERROR", message: cut(`the sandbox failed: ${String(err)}`) });
    } finally {
      this.o.clock.clearTimeout(wall);
      this.o.signal.removeEventListener("abort", onAbort);
      try {
        done?.dispose();
      } catch {
        // The module trapped; it is dropped with the run.
      }
    }
  }

  private async loop(done: QuickJSHandle): Promise<RunOutcome> {
    const { context } = this;
    for (;;) {
      if (this.stop) return this.stopped(this.stop);
      const jobs = this.slice(() => this.runtime.executePendingJobs());
      if (jobs.error) return this.failed(jobs.error, "the script failed");
      if (this.stop) return this.stopped(this.stop);
      const state = context.getPromiseState(done);
      if (state.type === "fulfilled") {
        const text = context.typeof(state.value) === "string" ? context.getString(state.value) : undefined;
        state.value.dispose();
        return this.finished(text);
      }
      if (state.type === "rejected") return this.failed(state.error, "the script failed");
      if (this.deferreds.size === 0 && this.runtime.hasPendingJob() === false) {
        return this.stopped({
          code: "EMCP_CODE_ERROR",
          message:
            "the script awaits a promise that nothing can settle (no mcp.* call is in flight and there are no timers); return a value or await mcp.* calls only",
        });
      }
      // Wait for an mcp.* call to settle (or a bound, or a cancel) before running the guest again.
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /** Frees everything the host holds in the guest, then the guest; a QuickJS abort here loses only this run's module. */
  dispose(): void {
    this.disposed = true;
    this.inflight.abort("the run ended");
    for (const d of this.deferreds) d.dispose();
    this.deferreds.clear();
    try {
      this.context.dispose();
      this.runtime.dispose();
    } catch {
      // A handle left alive makes QuickJS assert on free; the module is this run's alone and is dropped with it.
    }
  }

  /** The mcp functions this run offers, in GUEST_FUNCTIONS order. */
  private offered(): GuestFunction[] {
    return (Object.keys(GUEST_FUNCTIONS) as GuestFunction[]).filter((op) => this.o.ops[op] !== undefined);
  }

  /** The two host functions the prelude captures and then deletes from globalThis. */
  private install(): void {
    const { context } = this;
    const call = context.newFunction("__emceepee_call", (op, args) => this.hostCall(context.getString(op), context.getString(args)));
    const log = context.newFunction("__emceepee_log", (level, text) => {
      this.hostLog(context.getString(level) === "error" ? "error" : "log", context.getString(text));
    });
    context.setProp(context.global, "__emceepee_call", call);
    context.setProp(context.global, "__emceepee_log", log);
    call.dispose();
    log.dispose();
  }

  private hostCall(op: string, argsJson: string): QuickJSHandle {
    const deferred = this.context.newPromise();
    this.deferreds.add(deferred);
    const settle = (reply: { value: unknown } | { error: HostFailure }) => {
      if (this.disposed || !deferred.alive) return;
      let text: string;
      try {
        text = JSON.stringify(reply) ?? '{"value":null}';
      } catch {
        text = JSON.stringify({ error: { code: "EMCP_INTERNAL", message: `mcp.${op} returned a value that is not JSON` } });
      }
      this.deferreds.delete(deferred);
      try {
        // A reply larger than the script's memory cannot enter it: the run ends at the memory bound.
        if (text.length > this.o.limits.memoryBytes) throw new RangeError("reply larger than memoryBytes");
        const handle = this.context.newString(text);
        try {
          deferred.resolve(handle);
        } finally {
          handle.dispose();
        }
      } catch {
        deferred.dispose();
        this.halt(this.bound("memory"));
      }
      this.wake();
    };
    const fn = this.offered().includes(op as GuestFunction) ? this.o.ops[op as GuestFunction] : undefined;
    if (!fn) {
      settle({ error: { code: "EMCP_BAD_ARGUMENTS", message: `mcp has no function '${op}'; it has ${this.offered().join(", ")}` } });
      return deferred.handle;
    }
    if (++this.calls > this.o.limits.maxCalls) {
      const stop = { code: "EMCP_CODE_LIMIT" as const, message: this.boundMessage("number of mcp.* calls", "maxCalls", String(this.o.limits.maxCalls)) };
      settle({ error: { code: stop.code, message: stop.message } });
      this.halt(stop);
      return deferred.handle;
    }
    let args: unknown;
    try {
      args = JSON.parse(argsJson);
    } catch {
      args = undefined;
    }
    fn(Array.isArray(args) ? args : [], this.inflight.signal).then(
      (value) => settle({ value: value ?? null }),
      (err: unknown) => settle({ error: failureOf(err) }),
    );
    return deferred.handle;
  }

  private hostLog(level: LogLine["level"], text: string): void {
    if (this.stop) return;
    this.outputBytes += Buffer.byteLength(text) + 1;
    if (this.outputBytes > this.o.limits.maxOutputBytes) {
      this.halt({
        code: "EMCP_CODE_LIMIT",
        message: this.boundMessage("output size (console output and result)", "maxOutputBytes", `${this.o.limits.maxOutputBytes} bytes`),
      });
      return;
    }
    this.logs.push({ level, text });
  }

  /** The script's result: the JSON text the wrapper made, checked against the output bound. */
  private finished(text: string | undefined): RunOutcome {
    if (text === undefined) return this.stopped({ code: "EMCP_CODE_ERROR", message: "the script's result could not be read" });
    this.outputBytes += Buffer.byteLength(text);
    if (this.outputBytes > this.o.limits.maxOutputBytes) {
      return this.stopped({
        code: "EMCP_CODE_LIMIT",
        message: this.boundMessage("output size (console output and result)", "maxOutputBytes", `${this.o.limits.maxOutputBytes} bytes`),
      });
    }
    let ended: { ok?: unknown; value?: unknown; error?: unknown } | undefined;
    try {
      ended = JSON.parse(text) as typeof ended;
    } catch {
      ended = undefined;
    }
    if (ended?.ok === true) return { ok: true, result: ended.value ?? null, logs: this.logs };
    if (ended?.ok === false && typeof ended.error === "string") {
      // QuickJS's own bounds, thrown inside the script and not caught there.
      if (ended.error.startsWith("threw InternalError: out of memory")) return this.stopped(this.bound("memory"));
      if (ended.error.startsWith("threw InternalError: stack overflow")) return this.stopped(this.bound("stack"));
      return this.stopped({ code: "EMCP_CODE_ERROR", message: cut(`the script ${ended.error}`) });
    }
    return this.stopped({ code: "EMCP_CODE_ERROR", message: "the script's result could not be read (did it replace JSON or Promise?)" });
  }

  /** A failure QuickJS reports itself (compile errors, and what escapes the wrapper: out of memory, stack overflow, interrupts). */
  private failed(handle: QuickJSHandle, what: string): RunOutcome {
    let described: { name?: unknown; message?: unknown; stack?: unknown } | undefined;
    try {
      described = this.context.dump(handle) as typeof described;
    } catch {
      described = undefined;
    } finally {
      handle.dispose();
    }
    if (this.stop) return this.stopped(this.stop);
    const name = typeof described?.name === "string" ? described.name : "Error";
    const message = typeof described?.message === "string" ? described.message : "(no message)";
    // Out of memory, or a failure that could not even be described because memory ran out.
    if ((name === "InternalError" && message === "out of memory") || (described === undefined && this.memoryFull())) return this.stopped(this.bound("memory"));
    if (name === "InternalError" && message === "stack overflow") return this.stopped(this.bound("stack"));
    const at = typeof described?.stack === "string" ? /at [^\n]*/.exec(described.stack)?.[0] : undefined;
    return this.stopped({ code: "EMCP_CODE_ERROR", message: cut(`${what}: ${name}: ${message}${at ? ` (${at.trim()})` : ""}`) });
  }

  private stopped(stop: Stop): RunOutcome {
    return { ok: false, code: stop.code, message: stop.message, logs: this.logs };
  }

  /** Ends the run at the next chance: the interrupt handler fires inside the guest, the driver loop stops. */
  private halt(stop: Stop): void {
    this.stop ??= stop;
    this.inflight.abort(stop.message);
    this.wake();
  }

  /** Runs one synchronous slice of the guest, counting its CPU time. */
  private slice<T>(fn: () => T): T {
    // Wall-clock time of the slice: the script computes on the gateway's thread, so this is the time it holds it.
    this.sliceStart = performance.now();
    try {
      return fn();
    } finally {
      this.cpuUsedMs += performance.now() - this.sliceStart;
      this.sliceStart = undefined;
    }
  }

  private shouldInterrupt(): boolean {
    if (this.stop) return true;
    const used = this.cpuUsedMs + (this.sliceStart === undefined ? 0 : performance.now() - this.sliceStart);
    if (used > this.o.limits.cpuTimeMs) {
      this.halt({ code: "EMCP_CODE_LIMIT", message: this.boundMessage("CPU time", "cpuTimeMs", `${this.o.limits.cpuTimeMs} ms`) });
      return true;
    }
    if (this.o.clock.now() > this.deadline) {
      this.halt({ code: "EMCP_CODE_LIMIT", message: this.boundMessage("wall time", "wallTimeMs", `${this.o.limits.wallTimeMs} ms`) });
      return true;
    }
    return false;
  }

  /** Whether the WebAssembly memory has grown to (within a page of) its cap. */
  private memoryFull(): boolean {
    return this.memory.buffer.byteLength + WASM_PAGE > ENGINE_BYTES + this.o.limits.memoryBytes;
  }

  /** The bounds QuickJS enforces itself. */
  private bound(which: "memory" | "stack"): Stop {
    const { memoryBytes, stackBytes } = this.o.limits;
    const message =
      which === "memory"
        ? this.boundMessage("memory", "memoryBytes", `${memoryBytes} bytes`)
        : this.boundMessage("stack size", "stackBytes", `${stackBytes} bytes`);
    return { code: "EMCP_CODE_LIMIT", message };
  }

  private boundMessage(bound: string, key: keyof RunLimits, value: string): string {
    return `the script went past its ${bound} bound (${SETTING}.${key}: ${value}) and was stopped; do less in one run (split the work over several), or ask the operator to raise ${SETTING}.${key}`;
  }
}

/** A host operation's failure as the guest sees it: the gateway's code and message. */
function failureOf(err: unknown): HostFailure {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  const code = typeof e?.code === "string" && e.code.startsWith("EMCP_") ? e.code : "EMCP_INTERNAL";
  return { code, message: typeof e?.message === "string" ? e.message : String(err) };
}

function cut(text: string): string {
  return text.length <= MAX_ERROR_CHARS ? text : `${text.slice(0, MAX_ERROR_CHARS)}… (${text.length - MAX_ERROR_CHARS} more characters)`;
}
