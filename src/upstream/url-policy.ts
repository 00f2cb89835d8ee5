/**
 * Which URLs a server added at runtime may use (`gateway.servers.runtimeUrls`,
 * docs/adr/0015). A pattern is a URL prefix (`https://mcp.example.com/`), a
 * host (`api.example.com`, `*.example.com`), an IP address or a CIDR range.
 * A URL is refused when its host, its prefix or any address its host resolves
 * to matches a `deny` pattern; with a non-empty `allow`, it must also match an
 * `allow` pattern (IP and CIDR patterns: every resolved address). An IPv6
 * address that embeds an IPv4 one (compatible, mapped, NAT64) is matched as
 * that IPv4 address too. Checked by add_server before anything is sent, and
 * again before every request of a runtime server (remote-fetch.ts); the
 * runtime server's connections resolve their host through `connectLookup`,
 * which applies the address rules to the very addresses connected to (DNS
 * rebinding: no second, unchecked lookup).
 */
import { lookup as dnsLookup } from "node:dns/promises";
import type { LookupAddress, LookupOptions } from "node:dns";
import { createRequire } from "node:module";
import { isIP } from "node:net";
import type * as Undici from "undici";
import { normalizeHost, parseUrlPattern, type UrlPattern } from "../config/url-patterns.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import type { FetchLike } from "../mcp/sse-request-tap.js";

export interface RuntimeUrlRules {
  allow: readonly string[];
  deny: readonly string[];
}

/** Resolves a host name to its addresses (injectable for tests). */
export type Lookup = (host: string) => Promise<string[]>;

const systemLookup: Lookup = async (host) => (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address);

/**
 * The IPv4 address an IPv6 address carries in its last 32 bits, for the
 * prefixes that mean "this IPv4 host": ::/96 (compatible, not :: or ::1),
 * ::ffff:0:0/96 (mapped) and 64:ff9b::/96 (NAT64). Undefined otherwise.
 */
export function embeddedIPv4(address: string): string | undefined {
  if (isIP(address) !== 6) return undefined;
  let text = address.toLowerCase().replace(/%.*$/, "");
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right];
  const g = groups.map((x) => parseInt(x, 16));
  if (g.length !== 8 || g.some((x) => Number.isNaN(x))) return undefined;
  const prefix = g.slice(0, 6).join(":");
  const low = g[6]! * 65536 + g[7]!;
  const compatible = prefix === "0:0:0:0:0:0" && low > 1;
  if (!compatible && prefix !== "0:0:0:0:0:65535" && prefix !== "100:65435:0:0:0:0") return undefined;
  return [g[6]! >> 8, g[6]! & 255, g[7]! >> 8, g[7]! & 255].join(".");
}

/** An address as it is matched: itself, and for an IPv6 address embedding an IPv4 one, that IPv4 address too. */
function forms(address: string): Array<[string, "ipv4" | "ipv6"]> {
  if (isIP(address) === 4) return [[address, "ipv4"]];
  const v4 = embeddedIPv4(address);
  return v4
    ? [
        [address, "ipv6"],
        [v4, "ipv4"],
      ]
    : [[address, "ipv6"]];
}

interface Target {
  /** The URL; absent at connect time (a prefix pattern then compares its host only: the URL was checked before the request). */
  href?: string;
  host: string;
  addresses: string[];
}

function matches(p: UrlPattern, target: Target, every: boolean): boolean {
  switch (p.kind) {
    case "prefix":
      return target.href !== undefined ? target.href.startsWith(p.href) : normalizeHost(new URL(p.href).hostname) === target.host;
    case "host":
      return p.wildcard ? target.host.endsWith(p.host) : target.host === p.host;
    case "address": {
      const hit = (a: string) => forms(a).some(([addr, type]) => p.list.check(addr, type));
      return target.addresses.length > 0 && (every ? target.addresses.every(hit) : target.addresses.some(hit));
    }
  }
}

export class RuntimeUrlPolicy {
  private readonly allow: UrlPattern[];
  private readonly deny: UrlPattern[];

  constructor(
    rules: RuntimeUrlRules,
    private readonly lookup: Lookup = systemLookup,
  ) {
    this.allow = rules.allow.map(parseUrlPattern);
    this.deny = rules.deny.map(parseUrlPattern);
  }

  /**
   * Resolves `url`'s host and throws EMCP_FORBIDDEN (details.setting:
   * gateway.servers.runtimeUrls) when the rules refuse it, or when the host
   * cannot be resolved (refused rather than unchecked). Nothing is sent.
   */
  async check(url: string | URL, server: string): Promise<void> {
    const parsed = new URL(url);
    const host = normalizeHost(parsed.hostname);
    const what = `the URL ${parsed.protocol}//${parsed.host}${parsed.pathname} of server '${server}'`;
    const target: Target = { href: parsed.href, host, addresses: [] };
    // Host and prefix patterns first: a denied name is refused without a DNS query.
    const named = this.deny.find((p) => p.kind !== "address" && matches(p, target, false));
    if (named) throw this.refused(server, what, `it matches '${named.text}' in gateway.servers.runtimeUrls.deny`);
    target.addresses = isIP(host) !== 0 ? [host] : await this.resolve(host, server, what);
    this.checkAddresses(target, server, what);
  }

  /**
   * A `lookup` for net/tls.connect (the runtime server's connections): resolves
   * `hostname` with this policy's resolver and hands the connection only
   * addresses the rules allow (all of them, or it fails with EMCP_FORBIDDEN),
   * so what is connected to is what was checked.
   */
  connectLookup(server: string) {
    return (hostname: string, options: LookupOptions, callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void): void => {
      const host = normalizeHost(hostname);
      const what = `a connection to '${host}' for server '${server}'`;
      const target: Target = { host, addresses: [] };
      void (async () => {
        const named = this.deny.find((p) => p.kind !== "address" && matches(p, target, false));
        if (named) throw this.refused(server, what, `it matches '${named.text}' in gateway.servers.runtimeUrls.deny`);
        target.addresses = isIP(host) !== 0 ? [host] : await this.resolve(host, server, what);
        this.checkAddresses(target, server, what);
        const family = options.family === 4 || options.family === "IPv4" ? 4 : options.family === 6 || options.family === "IPv6" ? 6 : 0;
        const usable = target.addresses.map((address) => ({ address, family: isIP(address) })).filter((a) => family === 0 || a.family === family);
        if (usable.length === 0) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host} (no IPv${family} address)`), { code: "ENOTFOUND" });
        return usable;
      })().then(
        (usable) => (options.all ? callback(null, usable) : callback(null, usable[0]!.address, usable[0]!.family)),
        (err: Error) => callback(err, options.all ? [] : "", 0),
      );
    };
  }

  /**
   * A fetch whose connections resolve through `connectLookup` (an undici
   * Agent of its own; Node's fetch takes no lookup). A refusal at connect
   * time rejects with the EMCP_FORBIDDEN error itself. TLS SNI and Host stay
   * the URL's host name: only the name's resolution is ours.
   */
  fetchFor(server: string): FetchLike {
    // undici (CommonJS) is required by the first server added at runtime, not at every start (docs/adr/0017-lazy-start.md).
    const { Agent, fetch: undiciFetch } = createRequire(import.meta.url)("undici") as typeof Undici;
    const dispatcher = new Agent({ connect: { lookup: this.connectLookup(server) } });
    return async (url, init) => {
      try {
        return await undiciFetch(url, { ...(init as unknown as Undici.RequestInit), dispatcher });
      } catch (err) {
        const cause = (err as { cause?: unknown }).cause;
        throw cause instanceof GatewayError ? cause : err;
      }
    };
  }

  private async resolve(host: string, server: string, what: string): Promise<string[]> {
    try {
      return await this.lookup(host);
    } catch (err) {
      throw this.refused(server, what, `its host '${host}' could not be resolved to check it (${(err as Error).message})`);
    }
  }

  private checkAddresses(target: Target, server: string, what: string): void {
    const denied = this.deny.find((p) => p.kind === "address" && matches(p, target, false));
    if (denied) {
      const via = isIP(target.host) !== 0 ? "" : ` (${target.host} resolves to ${target.addresses.join(", ")})`;
      throw this.refused(server, what, `its address${via} matches '${denied.text}' in gateway.servers.runtimeUrls.deny`);
    }
    if (this.allow.length > 0 && !this.allow.some((p) => matches(p, target, true))) {
      throw this.refused(server, what, `it matches no pattern of gateway.servers.runtimeUrls.allow (${this.allow.map((p) => p.text).join(", ")})`);
    }
  }

  private refused(server: string, what: string, why: string): GatewayError {
    return new GatewayError(
      ErrorCodes.FORBIDDEN,
      `${what} is refused: ${why}. Servers added at runtime may only use URLs the operator allows; ask the gateway's operator to change gateway.servers.runtimeUrls, or to add the server to the config file.`,
      { details: { server, setting: "gateway.servers.runtimeUrls" } },
    );
  }
}
