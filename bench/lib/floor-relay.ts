/**
 * The floor of `bench:relay` (issue 27): the smallest correct JSON-RPC relay a
 * person would write in Node, run as its own process so its CPU per call is
 * the honest lower bound for "a relay in Node" on the same machine and in the
 * same rounds. A bench peer, not product code.
 *
 * `node --import tsx bench/lib/floor-relay.ts <port> <command> [args…]`:
 * node:http on 127.0.0.1:<port>/mcp in front of one stdio server (`command`),
 * initialized once at start. Per POST: read and parse the body; `initialize`
 * is answered from the server's own answer (a new session id); a notification
 * gets 202; a request gets its id rewritten to a counter, one line written to
 * the server's stdin, and the answer, read off its stdout (line splitting) and
 * mapped back to the client's id, is the JSON body. GET is 405 (no listen
 * stream), DELETE 200. No batching, SSE, resumption, cancel or progress: what
 * the bench's client does not ask for is left out.
 */
import { spawn } from "node:child_process";
import http from "node:http";

const [portArg, command, ...args] = process.argv.slice(2);
if (!portArg || !command) throw new Error("usage: floor-relay.ts <port> <command> [args…]");

interface Message {
  jsonrpc: "2.0";
  id?: string | number;
  method?: string;
  result?: unknown;
  error?: unknown;
}

const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
child.once("exit", (code) => {
  process.stderr.write(`floor-relay: upstream exited ${code}\n`);
  process.exit(1);
});
const waiting = new Map<number, (msg: Message) => void>();
let nextId = 0;
let sessions = 0;

/** Writes one request to the upstream; `answer` gets its response, id already the counter's. */
function forward(msg: Message, answer: (msg: Message) => void): void {
  const id = ++nextId;
  waiting.set(id, answer);
  msg.id = id;
  child.stdin.write(`${JSON.stringify(msg)}\n`);
}

let tail = "";
child.stdout.setEncoding("utf8");
child.stdout.on("data", (chunk: string) => {
  const lines = (tail + chunk).split("\n");
  tail = lines.pop()!;
  for (const line of lines) {
    if (!line) continue;
    const msg = JSON.parse(line) as Message;
    if (typeof msg.id !== "number" || msg.method !== undefined) continue; // the upstream's notifications and requests: not needed here
    const answer = waiting.get(msg.id);
    if (!answer) continue;
    waiting.delete(msg.id);
    answer(msg);
  }
});

function json(res: http.ServerResponse, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(200, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

async function main(): Promise<void> {
  const init = await new Promise<Message>((resolve) =>
    forward(
      {
        jsonrpc: "2.0",
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "floor-relay", version: "1" } },
      } as Message,
      resolve,
    ),
  );
  child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`);

  const server = http.createServer((req, res) => {
    if (req.method === "DELETE") return void res.writeHead(200).end();
    if (req.method !== "POST") return void res.writeHead(405).end();
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const msg = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Message;
      if (msg.id === undefined) return void res.writeHead(202).end();
      const clientId = msg.id;
      if (msg.method === "initialize") return json(res, { jsonrpc: "2.0", id: clientId, result: init.result }, { "mcp-session-id": `s${++sessions}` });
      forward(msg, (answer) => {
        answer.id = clientId;
        json(res, answer);
      });
    });
  });
  server.listen(Number(portArg), "127.0.0.1");
}

main().catch((err: unknown) => {
  process.stderr.write(`floor-relay: ${String(err)}\n`);
  process.exit(1);
});
