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

/** One headless Chromium; playwright's launch() gives it a fresh temporary profile and removes it on close. */
export async function launchBrowser(): Promise<TestBrowser> {
  const browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: ARGS, headless: true });
  return { browser, close: () => browser.close() };
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
