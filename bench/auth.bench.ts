/**
 * Inbound auth benchmark (`npm run bench:auth`, issue 22): what validating
 * the caller costs per call, as ratios in one run. Five `emceepee serve`
 * children with the same config (memory store, server-everything over stdio,
 * calls on the transparent face `/servers/everything/mcp`), differing only in
 * `gateway.token` / `gateway.auth.oauth`:
 * - none:    no auth;  control: the same again (its ratio to none is the run's noise floor)
 * - static:  the static bearer token (`gateway.token`)
 * - jwt:     OAuth, JWT access tokens from a real oidc-provider on loopback
 *            (test/helpers/oidc.ts, in this process), keys cached after the first call
 * - opaque:  OAuth, opaque tokens by introspection (RFC 7662), answers cached (`cacheMs` default 60 s)
 * Calls are interleaved (each call goes to the next child, the order reversed
 * every iteration). Latency is the client's; the gateway's CPU per call is
 * read from /proc/<pid>/task/<tid>/schedstat (all threads), per round, and
 * each round's ratio to none and to static is kept (the median is reported).
 * Then the verifier alone, in this process, in a tight loop: µs per check.
 *
 * Options: --calls=1500 --rounds=10 --warmup=50 --loop=5000; --quick (300, 5, 20, 2000).
 * Output: markdown on stdout, progress on stderr.
 */
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import type { IncomingMessage } from "node:http";
import os from "node:os";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { Authenticator, type OAuthSettings } from "../src/auth/authenticator.js";
import { IssuerKeys } from "../src/auth/issuer-keys.js";
import { verifyJwt } from "../src/auth/jwt.js";
import { secretEquals } from "../src/auth/secret.js";
import { systemClock } from "../src/clock.js";
import { everythingServerEntry } from "../src/config/demo.js";
import { loginHeadless, startOidcProvider, type TestOidcProvider } from "../test/helpers/oidc.js";
import { startGatewayProcess, type GatewayProcess } from "./lib/gateway-process.js";
import { option } from "./lib/options.js";
import { threadCpuMs } from "./lib/proc.js";
import { fmt, percentile, table } from "./lib/stats.js";

const quick = process.argv.includes("--quick") || process.env.BENCH_QUICK === "1";
const opts = {
  warmup: option("warmup", quick ? 20 : 50),
  calls: option("calls", quick ? 300 : 1500),
  rounds: option("rounds", quick ? 5 : 10),
  loop: option("loop", quick ? 2000 : 5000),
};
const started = performance.now();
const log = (msg: string) => process.stderr.write(`[bench:auth ${((performance.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);

const MODES = ["none", "control", "static", "jwt", "opaque"] as const;
type Mode = (typeof MODES)[number];
const SCOPE = "mcp:tools";
const STATIC_TOKEN = randomBytes(24).toString("base64url");
const REDIRECT = "http://127.0.0.1:65500/callback";
const PUBLIC_CLIENT = {
  client_id: "bench",
  redirect_uris: [REDIRECT],
  token_endpoint_auth_method: "none",
  grant_types: ["authorization_code"],
  response_types: ["code"],
};
const GATEWAY_CLIENT = {
  client_id: "emceepee-gateway",
  client_secret: randomBytes(24).toString("base64url"),
  redirect_uris: ["http://127.0.0.1:65501/unused"],
};
const FACE = "/servers/everything/mcp";
const LONG = { timeout: 300_000 };

/** An access token for `resource` from the provider: code + PKCE with the dev login page, as a client would. */
async function accessToken(idp: TestOidcProvider, resource: string, user: string): Promise<string> {
  const verifier = randomBytes(32).toString("base64url");
  const auth = new URL(`${idp.issuer}/auth`);
  for (const [k, v] of Object.entries({
    client_id: PUBLIC_CLIENT.client_id,
    response_type: "code",
    redirect_uri: REDIRECT,
    scope: SCOPE,
    resource,
    state: randomBytes(8).toString("hex"),
    code_challenge: createHash("sha256").update(verifier).digest("base64url"),
    code_challenge_method: "S256",
  }))
    auth.searchParams.set(k, v);
  const code = await loginHeadless(auth, user, REDIRECT);
  const res = await fetch(`${idp.issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: REDIRECT,
      client_id: PUBLIC_CLIENT.client_id,
      code_verifier: verifier,
      resource,
    }),
  });
  const body = (await res.json()) as { access_token?: string };
  if (!res.ok || body.access_token === undefined) throw new Error(`token endpoint answered ${res.status}: ${JSON.stringify(body)}`);
  return body.access_token;
}

async function connect(url: string, token: string | undefined): Promise<Client> {
  const client = new Client({ name: "bench-auth", version: "1.0.0" }, { capabilities: {} });
  const headers = token === undefined ? {} : { authorization: `Bearer ${token}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

async function echo(client: Client): Promise<void> {
  const r = (await client.callTool({ name: "echo", arguments: { message: "hi" } }, undefined, LONG)) as CallToolResult;
  if (r.isError) throw new Error(`tools/call failed: ${JSON.stringify(r.content)}`);
}

const median = (xs: readonly number[]) => percentile(xs, 50);

function oauthSettings(idp: TestOidcProvider, introspection: boolean): OAuthSettings {
  return {
    issuers: [idp.issuer],
    scopes: [SCOPE],
    audiences: [],
    clockSkewMs: 30_000,
    jwtType: "at+jwt",
    introspection: introspection
      ? {
          endpoint: `${idp.issuer}/token/introspection`,
          clientId: GATEWAY_CLIENT.client_id,
          clientSecret: GATEWAY_CLIENT.client_secret,
          cacheMs: 60_000,
          negativeCacheMs: 5_000,
          requireAudience: true,
          cacheMaxEntries: 10_000,
        }
      : { cacheMs: 60_000, negativeCacheMs: 5_000, requireAudience: true, cacheMaxEntries: 10_000 },
  };
}

interface Measured {
  samples: number[];
  cpuMs: number;
  vsNone: number[];
  vsStatic: number[];
}

async function main(): Promise<void> {
  const loadBefore = os.loadavg();
  // Which gateway's resource gets opaque tokens: decided once the gateways have their ports.
  const opaqueOrigins = new Set<string>();
  const idp = await startOidcProvider({
    scopes: [SCOPE],
    clients: [PUBLIC_CLIENT, GATEWAY_CLIENT],
    accessTokenTTL: 3600,
    format: (resource) => (opaqueOrigins.has(new URL(resource).origin) ? "opaque" : "jwt"),
  });
  const gateways = {} as Record<Mode, GatewayProcess>;
  const clients = {} as Record<Mode, Client>;
  const tokens = {} as Record<Mode, string | undefined>;
  const out = Object.fromEntries(MODES.map((m) => [m, { samples: [], cpuMs: 0, vsNone: [], vsStatic: [] }])) as unknown as Record<Mode, Measured>;
  let loop: Loop;
  try {
    for (const m of MODES) {
      const auth = m === "static" ? { token: STATIC_TOKEN } : m === "jwt" || m === "opaque" ? { auth: { oauth: oauthSettings(idp, m === "opaque") } } : {};
      const config = {
        mcpServers: { everything: { command: process.execPath, args: [everythingServerEntry(), "stdio"] } },
        gateway: { store: { kind: "memory" }, accessLog: false, metrics: { enabled: false }, ...auth },
      };
      log(`starting ${m}`);
      gateways[m] = await startGatewayProcess(config, `auth-${m}`, "silent", { OTEL_EXPORTER_OTLP_ENDPOINT: undefined, OTEL_TRACES_EXPORTER: undefined });
      if (m === "opaque") opaqueOrigins.add(gateways[m].origin);
      const resource = `${gateways[m].origin}${FACE}`;
      tokens[m] = m === "static" ? STATIC_TOKEN : m === "jwt" || m === "opaque" ? await accessToken(idp, resource, `bench-${m}`) : undefined;
      if (m === "jwt" && tokens[m]!.split(".").length !== 3) throw new Error("the provider did not issue a JWT for the jwt gateway");
      if (m === "opaque" && tokens[m]!.split(".").length === 3) throw new Error("the provider issued a JWT for the opaque gateway");
      clients[m] = await connect(resource, tokens[m]);
    }
    log(`warm-up ${opts.warmup} per gateway, then ${opts.calls} calls per gateway in ${opts.rounds} rounds, interleaved`);
    for (let i = 0; i < opts.warmup; i++) for (const m of MODES) await echo(clients[m]);
    const cpu = () => Object.fromEntries(MODES.map((m) => [m, threadCpuMs(gateways[m].pid)])) as Record<Mode, number>;
    const perRound = Math.ceil(opts.calls / opts.rounds);
    for (let done = 0; done < opts.calls;) {
      const before = cpu();
      const n = Math.min(perRound, opts.calls - done);
      for (let i = 0; i < n; i++, done++) {
        for (const m of done % 2 === 0 ? MODES : [...MODES].reverse()) {
          const t0 = performance.now();
          await echo(clients[m]);
          out[m].samples.push(performance.now() - t0);
        }
      }
      const after = cpu();
      const used = (m: Mode) => after[m] - before[m];
      for (const m of MODES) {
        out[m].cpuMs += used(m);
        out[m].vsNone.push(used(m) / used("none"));
        out[m].vsStatic.push(used(m) / used("static"));
      }
      log(`round done: ${done}/${opts.calls}`);
    }
    log(`the verifier alone, ${opts.loop} checks each`);
    loop = await verifierLoop(idp, gateways.jwt.origin, gateways.opaque.origin, tokens.jwt!, tokens.opaque!);
  } finally {
    for (const m of MODES) {
      await clients[m]?.close().catch(() => undefined);
      await gateways[m]?.stop();
    }
    await idp.close();
  }
  report(out, loop, loadBefore, os.loadavg());
}

// ---------------------------------------------------------------------------
// The verifier alone, in this process
// ---------------------------------------------------------------------------

type Loop = Array<{ what: string; usPerCheck: number; cpuUsPerCheck: number }>;
type Check = { what: string; check: () => unknown };

/** Each check `n` times, in `blocks` blocks taken in turn (so a busy moment hits all alike); the median block per check. */
async function timeChecks(checks: readonly Check[], n: number, blocks: number): Promise<Loop> {
  for (const c of checks) for (let i = 0; i < Math.min(200, n); i++) await c.check();
  const per = Math.max(1, Math.ceil(n / blocks));
  const wall = checks.map(() => [] as number[]);
  const cpu = checks.map(() => [] as number[]);
  for (let b = 0; b < blocks; b++) {
    for (const [k, c] of (b % 2 === 0 ? checks : [...checks].reverse()).map((c) => [checks.indexOf(c), c] as const)) {
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      for (let i = 0; i < per; i++) await c.check();
      wall[k]!.push(((performance.now() - t0) * 1000) / per);
      const used = process.cpuUsage(cpu0);
      cpu[k]!.push((used.user + used.system) / per);
    }
  }
  return checks.map((c, k) => ({ what: c.what, usPerCheck: median(wall[k]!), cpuUsPerCheck: median(cpu[k]!) }));
}

async function verifierLoop(idp: TestOidcProvider, jwtOrigin: string, opaqueOrigin: string, jwt: string, opaque: string): Promise<Loop> {
  const request = (origin: string, token: string) => ({ headers: { host: new URL(origin).host, authorization: `Bearer ${token}` } }) as IncomingMessage;
  // The Host header counts only when it names the port the gateway listens on (src/auth/resource-url.ts): the origin the tokens were issued for.
  const authenticator = (introspection: boolean, origin: string) =>
    new Authenticator({
      token: STATIC_TOKEN,
      oauth: oauthSettings(idp, introspection),
      urls: { trustForwardedHeaders: false, listenAddress: () => new URL(origin).host },
      isFace: () => true,
      clock: systemClock,
    });
  const withJwt = authenticator(false, jwtOrigin);
  const withIntrospection = authenticator(true, opaqueOrigin);
  const keys = new IssuerKeys({ clock: systemClock });
  const audiences = [`${jwtOrigin}${FACE}`];
  const expectPrincipal = async (p: Promise<object>) => {
    const r = await p;
    if (!("principal" in r || "hash" in r)) throw new Error(`the check refused: ${JSON.stringify(r)}`);
  };
  const header = `Bearer ${STATIC_TOKEN}`;
  // The signature alone: WebCrypto ECDSA P-256 (what jose calls for ES256), on a signature of the same size over a token-sized input.
  const pair = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, false, ["sign", "verify"]);
  const data = new TextEncoder().encode(jwt.slice(0, jwt.lastIndexOf(".")));
  const signature = await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, pair.privateKey, data);
  return timeChecks(
    [
      {
        // What the static-only guard does (http/guards.ts tokenMatches): the header's form, then a constant-time compare.
        what: "static token, static-only mode (header regex + secretEquals)",
        check: () => {
          const m = /^Bearer\s+(.+)$/i.exec(header);
          if (m === null || !secretEquals(m[1]!.trim(), STATIC_TOKEN)) throw new Error("static token refused");
        },
      },
      {
        what: "static token, OAuth also on (Authenticator.authenticate)",
        check: () => expectPrincipal(withJwt.authenticate(request(jwtOrigin, STATIC_TOKEN), FACE)),
      },
      {
        what: "ES256 signature alone (crypto.subtle.verify)",
        check: async () => {
          if (!(await crypto.subtle.verify({ name: "ECDSA", hash: "SHA-256" }, pair.publicKey, signature, data))) throw new Error("signature refused");
        },
      },
      {
        what: "JWT, keys cached (verifyJwt: jose ES256 + claims)",
        check: () => expectPrincipal(verifyJwt(jwt, { issuers: [idp.issuer], audiences, clockSkewMs: 30_000, type: "at+jwt" }, keys, systemClock)),
      },
      { what: "JWT, keys cached (Authenticator.authenticate)", check: () => expectPrincipal(withJwt.authenticate(request(jwtOrigin, jwt), FACE)) },
      {
        what: "opaque, introspection answer cached (Authenticator.authenticate)",
        check: () => expectPrincipal(withIntrospection.authenticate(request(opaqueOrigin, opaque), FACE)),
      },
    ],
    opts.loop,
    10,
  );
}

// ---------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------

function report(out: Record<Mode, Measured>, loop: Loop, loadBefore: number[], loadAfter: number[]): void {
  const p50 = (m: Mode) => percentile(out[m].samples, 50);
  const p95 = (m: Mode) => percentile(out[m].samples, 95);
  const cpuUs = (m: Mode) => (out[m].cpuMs * 1000) / out[m].samples.length;
  const x = (v: number, ref: number) => `×${fmt(v / ref, 3)}`;
  const label: Record<Mode, string> = {
    none: "(a) no auth",
    control: "(a′) no auth again (control)",
    static: "(b) static bearer token",
    jwt: "(c) OAuth JWT, keys cached",
    opaque: "(d) OAuth opaque, introspection cached",
  };
  const lines: string[] = [];
  lines.push(`## Inbound auth: per-call cost (transparent face, server-everything echo, ${opts.calls} calls per gateway, interleaved)`, "");
  lines.push(
    table(
      ["gateway", "p50 ms", "p95 ms", "p50 vs (a)", "p50 vs (b)", "gateway CPU µs/call", "CPU vs (a), median of rounds", "CPU vs (b), median of rounds"],
      MODES.map((m) => [
        label[m],
        fmt(p50(m), 3),
        fmt(p95(m), 3),
        x(p50(m), p50("none")),
        x(p50(m), p50("static")),
        fmt(cpuUs(m), 0),
        `×${fmt(median(out[m].vsNone), 3)}`,
        `×${fmt(median(out[m].vsStatic), 3)}`,
      ]),
    ),
  );
  lines.push("", "CPU ratios of each round (vs (a)):", "");
  for (const m of MODES) lines.push(`- ${m}: ${out[m].vsNone.map((r) => fmt(r, 2)).join(", ")}`);
  lines.push("", `## The verifier alone (this process, sequential awaits, ${opts.loop} checks each in 10 blocks taken in turn; median block)`, "");
  const staticUs = loop[0]!.cpuUsPerCheck;
  lines.push(
    table(
      ["check", "wall µs/check", "CPU µs/check", "CPU vs static-only"],
      loop.map((l) => [l.what, fmt(l.usPerCheck, 1), fmt(l.cpuUsPerCheck, 1), x(l.cpuUsPerCheck, staticUs)]),
    ),
  );
  let cpuModel = "";
  try {
    cpuModel = /model name\s*:\s*(.*)/.exec(fs.readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? "";
  } catch {
    // not Linux
  }
  lines.push(
    "",
    `- machine: ${os.cpus().length} CPUs ${cpuModel}; node ${process.version}; run ${new Date().toISOString()}; ${((performance.now() - started) / 1000).toFixed(0)} s`,
    `- load average (1/5/15 min) before: ${loadBefore.map((l) => l.toFixed(2)).join(" ")}; after: ${loadAfter.map((l) => l.toFixed(2)).join(" ")}`,
    `- options: ${JSON.stringify({ ...opts, quick })}`,
  );
  process.stdout.write(`${lines.join("\n")}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:auth failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
