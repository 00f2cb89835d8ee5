/**
 * The OpenTelemetry context manager: the active context (the span a request
 * runs in) carried through awaits by Node's AsyncLocalStorage, so a span
 * started for a downstream request is the parent of every upstream request
 * its handler makes — also those a promoted task makes later in the
 * background. The API's default manager carries nothing.
 *
 * Our own small one (what @opentelemetry/context-async-hooks does) rather
 * than a transitive dependency; installed once per process, and only when
 * tracing is on. If the OTel Node SDK installed its own first, that one stays.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { ROOT_CONTEXT, context, type Context, type ContextManager } from "@opentelemetry/api";

class AsyncLocalStorageContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();

  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    const cb = thisArg === undefined ? fn : fn.bind(thisArg);
    return this.storage.run(ctx, cb as never, ...args);
  }

  bind<T>(ctx: Context, target: T): T {
    if (typeof target !== "function") return target;
    const fn = target as unknown as (...args: unknown[]) => unknown;
    const run = (thunk: () => unknown) => this.with(ctx, thunk);
    return function (this: unknown, ...args: unknown[]) {
      return run(() => fn.apply(this, args));
    } as unknown as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.storage.disable();
    return this;
  }
}

let installed = false;

/** Makes the active context follow async calls (idempotent). */
export function installContextManager(): void {
  if (installed) return;
  installed = true;
  // false when another manager (the OTel Node SDK's) is already global: that one carries contexts as well.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager());
}
