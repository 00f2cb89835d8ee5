/**
 * Set-ups the era-* integration files share (issue 25): the same gateway,
 * peers and clean-up for the transparent face's and the meta face's variant of
 * one scenario — a call that waits for a person, a gateway restarted on its
 * SQLite file, two principals on a real OpenID provider, replicas on a
 * redis-server of their own — and what both assert of a task waiting for
 * its client.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ROOT, type TestGateway } from "./gateway.js";
import { freePort, startCliServe, stopChild, waitExit, type RunningCli } from "./core-extra.js";
import { inProcess, startEverythingHttpInProcess, startInProcessGateway, type InProcessHttpServer } from "./in-process.js";
import type { TestOidcProvider } from "./oidc.js";
import type { RedisServer } from "./redis.js";
import { waitFor } from "./tasks.js";

export interface ApprovalGateway {
  gw: TestGateway;
  /** A person (bob) approves the approval record of `taskId`, once it exists. */
  approve: (taskId: string) => Promise<void>;
}

/** An in-process gateway (server-everything, bearer `token`) whose governance sends echo to a person: `approve`, polled every 100 ms. */
export async function startApprovalGateway(token: string): Promise<ApprovalGateway> {
  const gw = await startInProcessGateway({
    mcpServers: { everything: inProcess("everything") },
    gateway: {
      token,
      governance: {
        profile: "enforce",
        rules: [{ id: "echo-needs-approval", server: "everything", tool: "echo", action: "approve" }],
        approvals: { pollMs: 100 },
      },
    },
  });
  return {
    gw,
    approve: async (taskId) => {
      const ctx = gw.gateway.context;
      const approval = await waitFor(async () => (await ctx.store.approvals.list()).find((r) => r.taskId === taskId), "the approval");
      await ctx.approvalRecords!.decide(approval.id, { name: "bob", principal: undefined }, "approve", "fine");
      ctx.approvals!.poke();
    },
  };
}

export interface RestartingGateway {
  /** The gateway's origin, e.g. http://127.0.0.1:PORT (the same across restarts). */
  base: string;
  /** SIGTERM (asserting a clean exit) and a new start on the same port and file. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The real CLI on a SQLite file in a fresh folder named after `name`, with
 * server-everything over Streamable HTTP as the upstream `remote` (its tasks
 * outlive the gateway), served in the test process (startEverythingHttpInProcess:
 * the gateway's restart is the point, not the upstream's process; docs/adr/0062).
 */
export async function startRestartingGateway(name: string): Promise<RestartingGateway> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), `emceepee-${name}-`));
  let remote: InProcessHttpServer | undefined;
  let served: RunningCli | undefined;
  const close = async () => {
    if (served) await stopChild(served.child);
    await remote?.close();
    await rm(tmp, { recursive: true, force: true });
  };
  try {
    remote = await startEverythingHttpInProcess();
    const config = path.join(tmp, "gateway.json");
    await writeFile(config, JSON.stringify({ mcpServers: { remote: { url: remote.url } } }));
    const port = await freePort();
    const args = ["--config", config, "--port", String(port), "--store", `sqlite:${path.join(tmp, "state.db")}`, "--no-upstream-check"];
    served = await startCliServe(ROOT, args);
    return {
      base: `http://127.0.0.1:${port}`,
      async restart() {
        const old = served!;
        served = undefined;
        old.child.kill("SIGTERM");
        const { code } = await waitExit(old.child, 60_000);
        assert.equal(code, 0, old.stderr().slice(-2000));
        served = await startCliServe(ROOT, args);
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** The static token of startTwoPrincipals' operator. */
export const OPERATOR_TOKEN = "static-operator-token-0123456789";

export interface TwoPrincipals {
  gw: TestGateway;
  /** The face the test calls (where alice's token is bound). */
  face: string;
  /** Alice's OAuth access token. */
  aliceToken(): string;
  close(): Promise<void>;
}

/**
 * An in-process gateway (`mcpServers`: server-everything unless given) with a static operator token and
 * a real OpenID provider; alice logs in through the SDK's OAuth client on
 * `faceOf(gateway URL)`, so her access token is bound to that face.
 */
export async function startTwoPrincipals(
  faceOf: (gatewayUrl: string) => string,
  mcpServers: Record<string, unknown> = { everything: inProcess("everything") },
  scope = "mcp:tools",
): Promise<TwoPrincipals> {
  // Loaded here, not at the top: most era-* files use none of oidc-provider.
  const [{ startOidcProvider }, { MemoryOAuthClient, loginAndConnect }] = await Promise.all([import("./oidc.js"), import("./oauth-client.js")]);
  const idp: TestOidcProvider = await startOidcProvider({ scopes: [scope] });
  let gw: TestGateway | undefined;
  let alice: Client | undefined;
  const close = async () => {
    await (alice?.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
    await alice?.close().catch(() => undefined);
    await gw?.close();
    await idp.close();
  };
  try {
    gw = await startInProcessGateway({
      mcpServers,
      gateway: { token: OPERATOR_TOKEN, auth: { oauth: { issuers: [idp.issuer], scopes: [scope] } } },
    });
    const face = faceOf(gw.url);
    const login = new MemoryOAuthClient("http://127.0.0.1:65500/callback");
    alice = (await loginAndConnect(face, "alice", login)).client;
    return { gw, face, aliceToken: () => login.saved!.access_token, close };
  } catch (err) {
    await close();
    throw err;
  }
}

export interface ReplicaSet {
  redis: RedisServer;
  /** Starts `emceepee serve` with `gateway.cluster` on (`id`, the set's secret, `leaseMs`) and `config` merged in; its origin. */
  start(
    id: string,
    config: { mcpServers: Record<string, unknown>; gateway?: Record<string, unknown> },
    leaseMs: number,
  ): Promise<{ base: string; served: RunningCli }>;
  close(): Promise<void>;
}

/** Replicas on a redis-server of their own, sharing `secret` (given them through EMCEEPEE_CLUSTER_SECRET, as an operator would). */
export async function startReplicaSet(name: string, secret: string): Promise<ReplicaSet> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), `emceepee-${name}-`));
  const served: RunningCli[] = [];
  let redis: RedisServer | undefined;
  const close = async () => {
    await Promise.allSettled(served.map((s) => stopChild(s.child)));
    await redis?.stop();
    await rm(tmp, { recursive: true, force: true });
  };
  try {
    const { startRedis } = await import("./redis.js"); // ioredis only where replicas run
    const r = (redis = await startRedis());
    return {
      redis: r,
      async start(id, config, leaseMs) {
        const port = await freePort();
        const file = path.join(tmp, `${id}.json`);
        const base = `http://127.0.0.1:${port}`;
        const cluster = { enabled: true, replicaId: id, advertiseUrl: base, secret: "${EMCEEPEE_CLUSTER_SECRET}", leaseMs };
        await writeFile(file, JSON.stringify({ ...config, gateway: { ...config.gateway, store: { kind: "redis", url: r.url }, cluster } }));
        const cli = await startCliServe(ROOT, ["--config", file, "--port", String(port), "--no-upstream-check"], 120_000, {
          EMCEEPEE_CLUSTER_SECRET: secret,
        });
        served.push(cli);
        return { base, served: cli };
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** The key of a modern task's only inputRequest, asserted to be the upstream's elicitation (its message matching `message`), bare of the 2025 related-task tag. */
export function onlyElicitation(task: Record<string, any>, message: RegExp): string {
  const keys = Object.keys(task.inputRequests as object);
  assert.equal(keys.length, 1, JSON.stringify(task.inputRequests));
  const request = task.inputRequests[keys[0]!];
  assert.equal(request.method, "elicitation/create");
  assert.match(request.params.message as string, message);
  assert.equal(request.params._meta?.["io.modelcontextprotocol/related-task"], undefined);
  return keys[0]!;
}
