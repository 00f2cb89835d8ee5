/**
 * What `serve` tells the operator in plain text: the start-up banner with
 * every endpoint, the warning for a bind beyond loopback without a token,
 * and listen failures worded as what to do. The CLI prints these; the
 * structured logs (stderr, JSON) say the same for machines.
 */
import type { GatewaySettings } from "../config/schema.js";
import { errorMessage } from "../errors.js";
import { callersAuthenticated } from "../auth/required.js";
import { isLoopbackHost } from "../http/guards.js";

/** The banner on stdout; its first line is `emceepee listening on <meta URL> (upstreams: …)`. */
export function banner(
  metaUrl: string,
  servers: readonly string[],
  checking: boolean,
  settings?: Pick<GatewaySettings, "console" | "metrics"> & Partial<Pick<GatewaySettings, "governance">>,
): string {
  const base = metaUrl.replace(/\/mcp$/, "");
  const rows: Array<[string, string]> = [
    ["meta-tools face", `${base}/mcp`],
    ["all upstreams", `${base}/all/mcp`],
    ...(servers.length
      ? servers.map((s): [string, string] => ["one upstream", `${base}/servers/${encodeURIComponent(s)}/mcp`])
      : [["one upstream", `${base}/servers/<name>/mcp (none configured yet; add_server adds one)`] as [string, string]]),
    ...(settings?.governance?.virtualServers ?? []).map((v): [string, string] => ["virtual server", `${base}/v/${encodeURIComponent(v.name)}/mcp`]),
    ...(settings?.console.enabled ? [["web console", `${base}/console`] as [string, string]] : []),
    ...(settings?.metrics.enabled ? [["metrics", `${base}${settings.metrics.path}`] as [string, string]] : []),
    ["health", `${base}/healthz  ${base}/readyz`],
  ];
  const lines = [
    `emceepee listening on ${metaUrl} (upstreams: ${servers.length ? servers.join(", ") : "none"})`,
    ...rows.map(([what, url]) => `  ${what.padEnd(18)}${url}`),
  ];
  if (checking && servers.length) lines.push("  checking each upstream once in the background: see upstream_check_ok / upstream_check_failed in the log");
  return lines.join("\n") + "\n";
}

/** A warning when `serve` binds beyond loopback without a token, else undefined. */
export function exposureWarning(
  settings: Pick<GatewaySettings, "host" | "token" | "allowedHosts"> & Partial<Pick<GatewaySettings, "auth">>,
): string | undefined {
  if (isLoopbackHost(settings.host) || callersAuthenticated(settings)) return undefined;
  const hosts = settings.allowedHosts.length
    ? ""
    : " Remote clients will also need their Host name accepted: --allowed-hosts <name>[,<name>…] (or gateway.allowedHosts).";
  return (
    `WARNING: listening on ${settings.host}, beyond this machine, WITHOUT A TOKEN: anyone who can reach this port can start your upstream servers and call their tools. ` +
    `Set --token <at least 16 characters> (or EMCEEPEE_TOKEN, or gateway.token), or bind --host 127.0.0.1.${hosts}`
  );
}

/** A listen error (EADDRINUSE, EACCES, EADDRNOTAVAIL) as an Error that says what to do; others as they are. */
export function listenFailure(err: unknown, host: string, port: number): Error {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const where = `${host}:${port}`;
  const message =
    code === "EADDRINUSE"
      ? `cannot listen on ${where}: the port is already in use (another emceepee?); pick another with --port <n>, or --port 0 for any free port`
      : code === "EACCES"
        ? `cannot listen on ${where}: permission denied (ports below 1024 need privileges); pick another with --port <n>, e.g. --port 8808`
        : code === "EADDRNOTAVAIL"
          ? `cannot listen on ${where}: ${host} is not an address of this machine; check --host (127.0.0.1, 0.0.0.0 for every interface)`
          : `cannot listen on ${where}: ${errorMessage(err)}`;
  return new Error(message, { cause: err });
}
