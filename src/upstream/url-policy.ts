/**
 * Which URLs a server added at runtime may use (`gateway.servers.runtimeUrls`,
 * docs/adr/0015). A pattern is a URL prefix (`https://mcp.example.com/`), a
 * host (`api.example.com`, `*.example.com`), an IP address or a CIDR range.
 * A URL is refused when its host, its prefix or any address its host resolves
 * to matches a `deny` pattern; with a non-empty `allow`, it must also match an
 * `allow` pattern (IP and CIDR patterns: every resolved address). Checked by
 * add_server before anything is sent, and again before every request of a
 * runtime server (remote-fetch.ts), so a name that resolves elsewhere later
 * (DNS rebinding) is caught at connect time too.
 */
import { lookup as dnsLookup } from "node:dns/promises";
import { isIP } from "node:net";
import { normalizeHost, parseUrlPattern, type UrlPattern } from "../config/url-patterns.js";
import { ErrorCodes, GatewayError } from "../errors.js";

export interface RuntimeUrlRules {
  allow: readonly string[];
  deny: readonly string[];
}

/** Resolves a host name to its addresses (injectable for tests). */
export type Lookup = (host: string) => Promise<string[]>;

const systemLookup: Lookup = async (host) => (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is checked as the IPv4 address it carries too. */
function forms(address: string): Array<[string, "ipv4" | "ipv6"]> {
  if (isIP(address) === 4) return [[address, "ipv4"]];
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped
    ? [
        [address, "ipv6"],
        [mapped[1]!, "ipv4"],
      ]
    : [[address, "ipv6"]];
}

interface Target {
  href: string;
  host: string;
  addresses: string[];
}

function matches(p: UrlPattern, target: Target, every: boolean): boolean {
  switch (p.kind) {
    case "prefix":
      return target.href.startsWith(p.href);
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
    const shown = `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
    const target: Target = { href: parsed.href, host, addresses: [] };
    // Host and prefix patterns first: a denied name is refused without a DNS query.
    const named = this.deny.find((p) => p.kind !== "address" && matches(p, target, false));
    if (named) throw this.refused(server, shown, `it matches '${named.text}' in gateway.servers.runtimeUrls.deny`);
    if (isIP(host) !== 0) {
      target.addresses = [host];
    } else {
      try {
        target.addresses = await this.lookup(host);
      } catch (err) {
        throw this.refused(server, shown, `its host '${host}' could not be resolved to check it (${(err as Error).message})`);
      }
    }
    const denied = this.deny.find((p) => p.kind === "address" && matches(p, target, false));
    if (denied) {
      const via = isIP(host) !== 0 ? "" : ` (${host} resolves to ${target.addresses.join(", ")})`;
      throw this.refused(server, shown, `its address${via} matches '${denied.text}' in gateway.servers.runtimeUrls.deny`);
    }
    if (this.allow.length > 0 && !this.allow.some((p) => matches(p, target, true))) {
      throw this.refused(server, shown, `it matches no pattern of gateway.servers.runtimeUrls.allow (${this.allow.map((p) => p.text).join(", ")})`);
    }
  }

  private refused(server: string, shown: string, why: string): GatewayError {
    return new GatewayError(
      ErrorCodes.FORBIDDEN,
      `the URL ${shown} of server '${server}' is refused: ${why}. Servers added at runtime may only use URLs the operator allows; ask the gateway's operator to change gateway.servers.runtimeUrls, or to add the server to the config file.`,
      { details: { server, setting: "gateway.servers.runtimeUrls" } },
    );
  }
}
