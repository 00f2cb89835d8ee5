/**
 * A real browser for console tests: playwright-core driving Debian's
 * Chromium (/usr/bin/chromium, or $CHROMIUM_PATH). Never downloads a browser.
 * Without it the caller skips — unless CI=true, where a missing browser fails
 * the run (.ci/run installs it).
 */
import { existsSync } from "node:fs";
import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type Page } from "playwright-core";

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run",
  "--disable-quic",
  "--disable-sync",
];

/** Why browser tests cannot run here (undefined: they can). Throws under CI=true instead of skipping. */
export function browserUnavailable(): string | undefined {
  if (existsSync(CHROMIUM_PATH)) return undefined;
  const why = `no Chromium at ${CHROMIUM_PATH} (apt-get install chromium, or set CHROMIUM_PATH); browser tests skipped`;
  if (process.env.CI === "true") throw new Error(`${why} — but CI=true requires them`);
  return why;
}

export interface TestBrowser {
  browser: Browser;
  close(): Promise<void>;
}

/**
 * How long the process's Chromium stays up after its last lease closes: a batch
 * (test/helpers/batch.ts) runs its browser files one after another, and the next
 * file's before() leases it again within this time instead of launching another
 * (each launch is a browser, zygote and GPU process: about 3 s of CPU at load).
 */
const LINGER_MS = 60_000;

let shared: { browser: Promise<Browser>; leases: number; linger?: NodeJS.Timeout } | undefined;

/**
 * A lease on the test process's one headless Chromium (playwright's launch()
 * gives it a fresh temporary profile and removes it on close). Each lease makes
 * its own contexts, so nothing is shared between tests but the process; close()
 * ends the lease, and the browser closes once no lease is left for LINGER_MS.
 * A browser that died or was disconnected is launched again for the next lease.
 */
export async function launchBrowser(): Promise<TestBrowser> {
  if (shared) {
    const browser = await shared.browser.catch(() => undefined);
    if (!browser?.isConnected()) shared = undefined;
  }
  shared ??= { browser: chromium.launch({ executablePath: CHROMIUM_PATH, args: ARGS, headless: true }), leases: 0 };
  const lease = shared;
  clearTimeout(lease.linger);
  lease.leases += 1;
  let browser: Browser;
  try {
    browser = await lease.browser;
  } catch (err) {
    lease.leases -= 1;
    if (shared === lease) shared = undefined;
    throw err;
  }
  let closed = false;
  return {
    browser,
    close: () => {
      if (closed) return Promise.resolve();
      closed = true;
      if (--lease.leases > 0) return Promise.resolve();
      // A new lease within LINGER_MS clears the timer. Unref'd: a process with
      // nothing else to do exits, and playwright kills its browser on exit.
      lease.linger = setTimeout(() => {
        if (shared === lease) shared = undefined;
        void browser.close().catch(() => undefined);
      }, LINGER_MS).unref();
      return Promise.resolve();
    },
  };
}

export interface TestPage {
  tb: TestBrowser;
  context: BrowserContext;
  page: Page;
}

/**
 * A Chromium with one context (1200×900 unless `options` say otherwise; a
 * 90 s default timeout for a loaded 2-core machine) and one page in it. Close
 * the context, then `tb`.
 */
export async function openTestPage(options: BrowserContextOptions = {}): Promise<TestPage> {
  const tb = await launchBrowser();
  try {
    const context = await tb.browser.newContext({ viewport: { width: 1200, height: 900 }, ...options });
    context.setDefaultTimeout(90_000);
    return { tb, context, page: await context.newPage() };
  } catch (err) {
    await tb.close();
    throw err;
  }
}
