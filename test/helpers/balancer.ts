/**
 * A tiny round-robin HTTP balancer for tests and benches in front of gateway
 * replicas (docs/adr/0013): each request goes to the next backend that
 * accepts the connection (a refused one is skipped, as a balancer's health
 * check would), its body buffered so it can be sent to the next; responses,
 * SSE streams included, are piped back. It records which backend served
 * each request. No stickiness: that is the point.
 */
import http from "node:http";

export interface Backend {
  /** A name for `hits`. */
  id: string;
  port: number;
}

/** Round-robin over the backends that accept connections (see the header). */
export class Balancer {
  readonly server: http.Server;
  private next = 0;
  /** Which replica served each request, in order. */
  readonly hits: Array<{ method: string; replica: string; session: string | undefined }> = [];
  port = 0;

  constructor(private readonly replicas: () => Backend[]) {
    this.server = http.createServer((req, res) => void this.handle(req, res));
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as { port: number }).port;
    return `http://127.0.0.1:${this.port}`;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const backends = this.replicas();
    for (let tries = 0; tries < backends.length; tries++) {
      const target = backends[this.next++ % backends.length]!;
      const ok = await new Promise<boolean>((resolve) => {
        const headers = { ...req.headers, host: `127.0.0.1:${target.port}` };
        const out = http.request({ host: "127.0.0.1", port: target.port, path: req.url, method: req.method, headers }, (up) => {
          this.hits.push({ method: req.method ?? "", replica: target.id, session: req.headers["mcp-session-id"] as string | undefined });
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
          up.on("error", () => res.destroy());
          resolve(true);
        });
        out.on("error", () => {
          if (res.headersSent) res.destroy();
          resolve(res.headersSent);
        });
        res.on("close", () => {
          if (!res.writableFinished) out.destroy();
        });
        out.end(body);
      });
      if (ok) return;
    }
    res.writeHead(502).end("no replica answered");
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
