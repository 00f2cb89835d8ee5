/**
 * gateway.servers.runtimeUrls (src/config/url-patterns.ts,
 * src/upstream/url-policy.ts) and the runtime servers' fetch
 * (src/upstream/remote-fetch.ts): patterns, resolution, the check before
 * every request and the connection's own lookup (DNS rebinding), error-body
 * excerpts. DNS is the one seam injected (`lookup`); requests go to a real
 * local listener.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { DEFAULT_DENIED_URLS, urlPatternProblem } from "../../src/config/url-patterns.js";
import { GatewayError } from "../../src/errors.js";
import { BODY_EXCERPT_CHARS, excerptOf, remoteFetch } from "../../src/upstream/remote-fetch.js";
import { embeddedIPv4, RuntimeUrlPolicy, type Lookup } from "../../src/upstream/url-policy.js";

const defaults = { allow: [], deny: DEFAULT_DENIED_URLS };
const dns =
  (answers: Record<string, string[]>): Lookup =>
  (host) =>
    answers[host] ? Promise.resolve(answers[host]) : Promise.reject(new Error(`getaddrinfo ENOTFOUND ${host}`));

async function refusal(policy: RuntimeUrlPolicy, url: string): Promise<string> {
  try {
    await policy.check(url, "s");
  } catch (err) {
    assert.ok(err instanceof GatewayError);
    assert.equal(err.code, "EMCP_FORBIDDEN");
    assert.equal(err.details?.setting, "gateway.servers.runtimeUrls");
    return err.message;
  }
  assert.fail(`${url} was allowed`);
}

test("the default deny list: link-local and metadata addresses in every spelling, and names resolving to them", async () => {
  const policy = new RuntimeUrlPolicy(defaults, dns({ "evil.example": ["93.184.216.34", "169.254.169.254"], "ok.example": ["93.184.216.34"] }));
  for (const url of [
    "http://169.254.169.254/latest",
    "http://169.254.1.2:8080/",
    "http://[::ffff:169.254.169.254]/",
    "http://[fe80::1]/",
    "http://[fd00:ec2::254]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[::a9fe:a9fe]/",
    "http://[::169.254.169.254]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[64:ff9b::169.254.169.254]/",
    "http://[0:0:0:0:0:ffff:169.254.169.254]/",
    "http://2852039166/",
    "http://0251.0376.0251.0376/",
    "http://0xa9fea9fe/",
    "http://0xa9.0xfe.0xa9.0xfe/",
    "http://100.100.100.200/latest/meta-data/",
    "http://[::ffff:100.100.100.200]/",
    "http://[64:ff9b::6464:64c8]/",
    "http://metadata.google.internal/",
    "http://METADATA.google.internal./",
    "http://evil.example/mcp",
  ]) {
    await refusal(policy, url);
  }
  assert.match(await refusal(policy, "http://evil.example/mcp"), /evil\.example resolves to 93\.184\.216\.34, 169\.254\.169\.254/);
  // A name whose DNS answer is an IPv6 spelling of the metadata address.
  for (const address of ["::a9fe:a9fe", "64:ff9b::a9fe:a9fe", "::ffff:169.254.169.254"]) {
    await refusal(new RuntimeUrlPolicy(defaults, dns({ "v6.example": [address] })), "http://v6.example/mcp");
  }
  await policy.check("http://ok.example/mcp", "s");
  await policy.check("http://127.0.0.1:9/mcp", "s");
  await policy.check("http://[::1]:9/mcp", "s");
});

test("IPv4 spellings are normalised by URL parsing; IPv6 forms embedding an IPv4 address are read as it", () => {
  // WHATWG URL turns decimal, octal and hex IPv4 hosts into dotted decimal: the policy sees 169.254.169.254.
  for (const host of ["2852039166", "0251.0376.0251.0376", "0xa9fea9fe", "0xa9.0xfe.0xa9.0xfe", "169.254.43518"]) {
    assert.equal(new URL(`http://${host}/`).hostname, "169.254.169.254", host);
  }
  assert.equal(new URL("http://[::169.254.169.254]/").hostname, "[::a9fe:a9fe]");
  assert.equal(embeddedIPv4("::a9fe:a9fe"), "169.254.169.254");
  assert.equal(embeddedIPv4("::ffff:a9fe:a9fe"), "169.254.169.254");
  assert.equal(embeddedIPv4("::ffff:169.254.169.254"), "169.254.169.254");
  assert.equal(embeddedIPv4("64:ff9b::a9fe:a9fe"), "169.254.169.254");
  assert.equal(embeddedIPv4("0:0:0:0:0:ffff:6464:64c8"), "100.100.100.200");
  for (const other of ["::1", "::", "fe80::1", "2001:db8::a9fe:a9fe", "64:ff9b:1::a9fe:a9fe", "169.254.169.254", "example.com"]) {
    assert.equal(embeddedIPv4(other), undefined, other);
  }
});

test("a name that cannot be resolved is refused, not let through unchecked", async () => {
  const message = await refusal(new RuntimeUrlPolicy(defaults, dns({})), "http://nowhere.example/mcp");
  assert.match(message, /could not be resolved/);
});

test("allow: URL prefixes, hosts and subdomains, CIDR ranges (every address); deny wins", async () => {
  const policy = new RuntimeUrlPolicy(
    { allow: ["https://mcp.example.com/v1/", "*.corp.example", "10.0.0.0/8"], deny: ["10.9.9.9"] },
    dns({ "mcp.example.com": ["93.184.216.34"], "a.corp.example": ["10.1.1.1"], "split.example": ["10.1.1.1", "93.184.216.34"], "in.example": ["10.2.2.2"] }),
  );
  await policy.check("https://mcp.example.com/v1/mcp", "s");
  await policy.check("https://a.corp.example/mcp", "s");
  await policy.check("http://in.example/mcp", "s");
  await refusal(policy, "https://mcp.example.com/v2/mcp");
  await refusal(policy, "https://mcp.example.com.evil.net/v1/mcp");
  assert.match(await refusal(policy, "http://split.example/mcp"), /matches no pattern of gateway\.servers\.runtimeUrls\.allow/);
  assert.match(await refusal(policy, "http://10.9.9.9/mcp"), /'10\.9\.9\.9' in gateway\.servers\.runtimeUrls\.deny/);
});

test("bad patterns are named", () => {
  assert.equal(urlPatternProblem("10.0.0.0/8"), undefined);
  assert.equal(urlPatternProblem("*.example.com"), undefined);
  assert.equal(urlPatternProblem("https://x.example/mcp"), undefined);
  assert.match(urlPatternProblem("10.0.0.0/33") ?? "", /not a valid CIDR range/);
  assert.match(urlPatternProblem("exa mple") ?? "", /not a host, IP address, CIDR range or http\(s\) URL prefix/);
});

test("a runtime server's connection resolves through the policy: the address connected to is the one checked", async (t) => {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(req.url ?? "");
    res.writeHead(200, { "Content-Type": "application/json" }).end("{}");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;

  // A name only the policy's resolver knows reaches the listener: the connection used that resolver.
  const known = remoteFetch({ server: "s", runtime: new RuntimeUrlPolicy(defaults, dns({ "internal.example": ["127.0.0.1"] })) });
  assert.equal(
    (await known(`http://internal.example:${port}/first`, { method: "POST", body: "{}", headers: { "Content-Type": "application/json" } })).status,
    200,
  );

  // Rebinding: the first answer (the check before the request) is public, every later one (the connection's) is the denied address.
  // `localhost` is what the system resolver would connect to: on the old code (a second, unchecked lookup) the request reached the listener.
  let lookups = 0;
  const rebinding: Lookup = () => Promise.resolve(lookups++ === 0 ? ["93.184.216.34"] : ["127.0.0.1"]);
  const policy = new RuntimeUrlPolicy({ allow: [], deny: [...DEFAULT_DENIED_URLS, "127.0.0.0/8", "::1"] }, rebinding);
  const fetch = remoteFetch({ server: "s", runtime: policy });
  await assert.rejects(fetch(`http://localhost:${port}/second`, { method: "POST" }), (err: unknown) => {
    assert.ok(err instanceof GatewayError, String(err));
    assert.equal(err.code, "EMCP_FORBIDDEN");
    assert.match(err.message, /localhost resolves to 127\.0\.0\.1\) matches '127\.0\.0\.0\/8'/);
    return true;
  });
  assert.ok(lookups >= 2, "the connection resolved the host through the policy");
  // And the check before each request still refuses once the answer has changed.
  await assert.rejects(fetch(`http://localhost:${port}/third`, { method: "POST" }), /EMCP_FORBIDDEN|refused/);
  assert.deepEqual(seen, ["/first"]);
});

test("error bodies: one line, at most the excerpt, marked when cut", async (t) => {
  assert.equal(excerptOf("  short\n\tanswer "), "short answer");
  const long = `${"a".repeat(BODY_EXCERPT_CHARS)}MARKER`;
  assert.equal(excerptOf(long), `${"a".repeat(BODY_EXCERPT_CHARS)}… (truncated)`);
  const server = createServer((_req, res) => res.writeHead(500).end(`${"b".repeat(100_000)}MARKER`));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  const response = await remoteFetch({ server: "s" })(`http://127.0.0.1:${port}/mcp`, { method: "POST" });
  assert.equal(response.status, 500);
  const text = await response.text();
  assert.ok(!text.includes("MARKER"));
  assert.ok(text.endsWith("… (truncated)"));
  assert.ok(text.length <= BODY_EXCERPT_CHARS + 20);
});
