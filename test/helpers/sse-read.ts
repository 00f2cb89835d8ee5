/** Reading a raw SSE response in tests that speak HTTP themselves (fast path, resumption). */
import assert from "node:assert/strict";

/**
 * Reads `res`'s body until its text matches `until` (cut after `boundMs`, so a stream that never says it fails the
 * assertion instead of hanging); the text so far. `keep`: leave the stream open for another read, else cancel it.
 */
export async function readUntil(res: Response, until: RegExp, what: string, keep = false, boundMs = 60_000): Promise<string> {
  const reader = res.body!.getReader();
  let text = "";
  const timer = setTimeout(() => void reader.cancel().catch(() => undefined), boundMs);
  try {
    while (!until.test(text)) {
      const { value, done } = await reader.read();
      assert.ok(!done, `the stream ended before ${what}: ${text}`);
      text += new TextDecoder().decode(value);
    }
    return text;
  } finally {
    clearTimeout(timer);
    if (!keep) await reader.cancel().catch(() => undefined);
    else reader.releaseLock();
  }
}
