/**
 * Summarises V8 `.cpuprofile` files (from `node --cpu-prof`): self time per
 * function and per package/file, top N, as a share of the sampled time.
 * Usage: node --import tsx bench/lib/cpuprofile-top.ts <file.cpuprofile>... [--top=25] [--per-call=<calls>]
 */
import fs from "node:fs";

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  startTime: number;
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const files = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const top = Number(process.argv.find((a) => a.startsWith("--top="))?.slice(6) ?? 25);
const perCall = Number(process.argv.find((a) => a.startsWith("--per-call="))?.slice(11) ?? 0);
/** Samples in the first `skip` ms of each profile (start-up, warm-up) are left out. */
const skipMs = Number(process.argv.find((a) => a.startsWith("--skip-ms="))?.slice(10) ?? 0);

const byFn = new Map<string, number>();
const byFile = new Map<string, number>();
/** Inclusive time: each function counted once per sample it is on the stack of. */
const inclusive = new Map<string, number>();
let total = 0;
let idle = 0;

function shortUrl(url: string): string {
  const nm = url.lastIndexOf("node_modules/");
  if (nm >= 0) {
    const rest = url.slice(nm + 13).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}/…/${rest.at(-1)}` : `${rest[0]}/…/${rest.at(-1)}`;
  }
  const src = url.indexOf("/src/");
  if (src >= 0) return url.slice(src + 1);
  return url.replace(/^file:\/\//, "") || "(native)";
}

for (const f of files) {
  const p = JSON.parse(fs.readFileSync(f, "utf8")) as Profile;
  const nodes = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  let t = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const n = nodes.get(p.samples[i]!)!;
    const us = p.timeDeltas[i] ?? 0;
    t += us;
    if (t < skipMs * 1000) continue;
    const seen = new Set<string>();
    for (let id: number | undefined = n.id; id !== undefined; id = parent.get(id)) {
      const f = nodes.get(id)!.callFrame;
      const k = `${f.functionName || "(anonymous)"} ${shortUrl(f.url)}:${f.lineNumber + 1}`;
      if (seen.has(k)) continue;
      seen.add(k);
      inclusive.set(k, (inclusive.get(k) ?? 0) + us);
    }
    const name = n.callFrame.functionName || "(anonymous)";
    if (name === "(idle)") {
      idle += us;
      continue;
    }
    total += us;
    const file = shortUrl(n.callFrame.url);
    const key = `${name} ${file}:${n.callFrame.lineNumber + 1}`;
    byFn.set(key, (byFn.get(key) ?? 0) + us);
    byFile.set(file, (byFile.get(file) ?? 0) + us);
  }
}

const unit = perCall > 0 ? "µs/call" : "ms";
const scale = (us: number): string => (perCall > 0 ? (us / perCall).toFixed(1) : (us / 1000).toFixed(1));
const print = (title: string, m: Map<string, number>): void => {
  console.log(`\n| ${title} | self ${unit} | share |\n|---|---|---|`);
  for (const [k, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`| ${k.replace(/\|/g, "\\|")} | ${scale(us)} | ${((us / total) * 100).toFixed(1)} % |`);
};
console.log(`busy ${(total / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms`);
print("function", byFn);
print("file", byFile);
print("function (inclusive)", inclusive);
