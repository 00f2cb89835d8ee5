/**
 * The patterns of `gateway.servers.runtimeUrls` (docs/adr/0015): a URL prefix
 * (`https://mcp.example.com/`), a host (`api.example.com`, `*.example.com`:
 * its subdomains), an IP address or a CIDR range. Parsed here, at config load
 * (a bad pattern names itself); src/upstream/url-policy.ts applies them.
 */
import { BlockList, isIP } from "node:net";

/** Denied unless the operator changes `deny`: link-local ranges and cloud metadata endpoints (Alibaba Cloud's is 100.100.100.200). */
export const DEFAULT_DENIED_URLS: readonly string[] = ["169.254.0.0/16", "fe80::/10", "fd00:ec2::254", "100.100.100.200", "metadata.google.internal"];

export type UrlPattern =
  | { kind: "prefix"; text: string; href: string }
  | { kind: "host"; text: string; host: string; wildcard: boolean }
  | { kind: "address"; text: string; list: BlockList };

/** Why `text` is not a pattern, or undefined when it is one (the config schema asks). */
export function urlPatternProblem(text: string): string | undefined {
  try {
    parseUrlPattern(text);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

export function parseUrlPattern(text: string): UrlPattern {
  const raw = text.trim();
  if (/^https?:\/\//i.test(raw)) {
    let href: string;
    try {
      href = new URL(raw).href;
    } catch {
      throw new Error(`'${text}' is not a valid URL prefix; write e.g. "https://mcp.example.com/"`);
    }
    return { kind: "prefix", text, href };
  }
  const [net, bits, extra] = raw.split("/");
  const address = unbracket(net ?? "");
  const family = isIP(address);
  if (family !== 0) {
    const list = new BlockList();
    const type = family === 4 ? "ipv4" : "ipv6";
    if (bits === undefined) {
      list.addAddress(address, type);
    } else {
      const prefix = Number(bits);
      if (extra !== undefined || !/^\d+$/.test(bits) || prefix > (family === 4 ? 32 : 128)) {
        throw new Error(`'${text}' is not a valid CIDR range; write e.g. "10.0.0.0/8" or "fd00::/8"`);
      }
      list.addSubnet(address, prefix, type);
    }
    return { kind: "address", text, list };
  }
  const host = normalizeHost(raw);
  if (bits !== undefined || !/^(\*\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(host)) {
    throw new Error(
      `'${text}' is not a host, IP address, CIDR range or http(s) URL prefix; write e.g. "api.example.com", "*.example.com", "10.0.0.0/8" or "https://mcp.example.com/"`,
    );
  }
  return host.startsWith("*.") ? { kind: "host", text, host: host.slice(1), wildcard: true } : { kind: "host", text, host, wildcard: false };
}

function unbracket(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

export function normalizeHost(host: string): string {
  return unbracket(host.toLowerCase()).replace(/\.$/, "");
}
