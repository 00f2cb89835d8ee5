/**
 * A raw 2026-07-28 `subscriptions/listen` stream for tests (issue 25): opens
 * the POST, reads its SSE frames as they come, waits for a message that
 * matches, and closes it (the client hanging up, as a modern client does).
 * With `signal`, the client may hang up before the answer's headers (while
 * the gateway sets the stream up): openListen then rejects with the abort.
 */
import { MODERN, TASKS_EXTENSION } from "./modern-requests.js";

export interface ListenMessage {
  id?: unknown;
  method?: string;
  params?: Record<string, any>;
  result?: Record<string, any>;
  error?: { code: number; message: string; data?: any };
}

export interface ListenStream {
  status: number;
  contentType: string | null;
  /** Every message read so far, in order. */
  messages: ListenMessage[];
  /** The first message (from the start of the stream) that matches, within `timeoutMs`. */
  next(match: (m: ListenMessage) => boolean, what: string, timeoutMs?: number): Promise<ListenMessage>;
  /** Resolves when the server ended the stream. */
  ended: Promise<void>;
  close(): void;
}

export interface ListenOptions {
  /** The envelope's clientCapabilities. @default the tasks extension */
  capabilities?: object;
  headers?: Record<string, string>;
  id?: string | number;
  /** Hangs up when it aborts, also before the headers came. */
  signal?: AbortSignal;
}

export async function openListen(url: string, notifications: unknown, o: ListenOptions = {}): Promise<ListenStream> {
  const abort = new AbortController();
  if (o.signal?.aborted) abort.abort(o.signal.reason);
  o.signal?.addEventListener("abort", () => abort.abort(o.signal?.reason), { once: true });
  const envelope = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": o.capabilities ?? { extensions: { [TASKS_EXTENSION]: {} } },
    "io.modelcontextprotocol/clientInfo": { name: "listen-test", version: "1" },
  };
  const res = await fetch(url, {
    method: "POST",
    signal: abort.signal,
    headers: {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": MODERN,
      "Mcp-Method": "subscriptions/listen",
      ...o.headers,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: o.id ?? "listen-1", method: "subscriptions/listen", params: { notifications, _meta: envelope } }),
  });
  const messages: ListenMessage[] = [];
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of [...waiters]) w();
  };
  const contentType = res.headers.get("content-type");
  const ended = (async () => {
    if (!res.body) return;
    if (!contentType?.includes("text/event-stream")) {
      messages.push(JSON.parse(await res.text()) as ListenMessage);
      return;
    }
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const data = block
            .split("\n")
            .filter((line) => line.startsWith("data:"))
            .map((line) => line.slice(5).trimStart())
            .join("\n");
          if (data) messages.push(JSON.parse(data) as ListenMessage);
        }
        wake();
      }
    } catch {
      // aborted by close()
    }
  })().finally(wake);
  let done = false;
  void ended.then(() => (done = true));
  return {
    status: res.status,
    contentType,
    messages,
    ended,
    close: () => abort.abort(),
    async next(match, what, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = messages.find(match);
        if (found) return found;
        if (done || Date.now() > deadline) throw new Error(`the listen stream never carried ${what}; it carried: ${JSON.stringify(messages)}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => w(), Math.max(0, deadline - Date.now()) + 1);
          const w = () => {
            clearTimeout(timer);
            waiters.delete(w);
            resolve();
          };
          waiters.add(w);
        });
      }
    },
  };
}
