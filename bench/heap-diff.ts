/**
 * Compares two V8 heap snapshots (`node --import tsx bench/heap-diff.ts
 * early.heapsnapshot late.heapsnapshot [--top=40]`, e.g. the soak bench's
 * `--snapshots`): live objects grouped by constructor (or node type for
 * strings, closures, arrays…), with their count and self size in each, sorted
 * by how much the group grew. What grows between two snapshots taken after a
 * full GC under the same load is what the process keeps.
 */
import fs from "node:fs";

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

type Groups = Map<string, { count: number; size: number }>;

function groups(file: string): Groups {
  const s = JSON.parse(fs.readFileSync(file, "utf8")) as Snapshot;
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const width = fields.length;
  const iType = fields.indexOf("type");
  const iName = fields.indexOf("name");
  const iSize = fields.indexOf("self_size");
  const out: Groups = new Map();
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + iType]!] ?? "?";
    const name = s.strings[s.nodes[i + iName]!] ?? "?";
    // Objects by constructor; closures by function name; strings, arrays, code… by type.
    const key = type === "object" ? name : type === "closure" ? `closure ${name || "(anonymous)"}` : `(${type})`;
    const g = out.get(key) ?? { count: 0, size: 0 };
    g.count++;
    g.size += s.nodes[i + iSize]!;
    out.set(key, g);
  }
  return out;
}

const [a, b] = process.argv.slice(2).filter((x) => !x.startsWith("--"));
if (!a || !b) throw new Error("usage: bench/heap-diff.ts <early.heapsnapshot> <late.heapsnapshot> [--top=40]");
const top = Number(process.argv.find((x) => x.startsWith("--top="))?.slice(6) ?? 40);
const early = groups(a);
const late = groups(b);
const rows = [...new Set([...early.keys(), ...late.keys()])].map((k) => {
  const e = early.get(k) ?? { count: 0, size: 0 };
  const l = late.get(k) ?? { count: 0, size: 0 };
  return { k, dc: l.count - e.count, ds: l.size - e.size, lc: l.count, ls: l.size };
});
const total = (g: Groups) => [...g.values()].reduce((t, x) => t + x.size, 0);
process.stdout.write(`self size: ${(total(early) / 1048576).toFixed(1)} MiB → ${(total(late) / 1048576).toFixed(1)} MiB\n\n`);
process.stdout.write("| group | Δ count | Δ self size KiB | count (late) | self size KiB (late) |\n| --- | --- | --- | --- | --- |\n");
for (const r of rows.sort((x, y) => y.ds - x.ds).slice(0, top))
  process.stdout.write(`| ${r.k.replace(/\|/g, "\\|").slice(0, 80)} | ${r.dc} | ${(r.ds / 1024).toFixed(1)} | ${r.lc} | ${(r.ls / 1024).toFixed(1)} |\n`);
process.stdout.write("\nBy count:\n\n| group | Δ count | count (late) |\n| --- | --- | --- |\n");
for (const r of rows.sort((x, y) => y.dc - x.dc).slice(0, top)) process.stdout.write(`| ${r.k.replace(/\|/g, "\\|").slice(0, 80)} | ${r.dc} | ${r.lc} |\n`);

// --retainers=<Constructor or (type)>: the shortest path from the GC roots to a few live objects of
// that constructor (or node type) made after the early snapshot (weak edges skipped): who keeps them.
const wanted = process.argv.find((x) => x.startsWith("--retainers="))?.slice(12);
if (wanted) retainers(b, wanted, Number(process.argv.find((x) => x.startsWith("--paths="))?.slice(8) ?? 3), maxId(a));

/** The highest id of a JS heap object in a snapshot (synthetic and native nodes have ids of their own). */
function maxId(file: string): number {
  const s = JSON.parse(fs.readFileSync(file, "utf8")) as Snapshot;
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const [width, iId, iType] = [fields.length, fields.indexOf("id"), fields.indexOf("type")];
  let max = 0;
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + iType]!];
    if (type !== "synthetic" && type !== "native") max = Math.max(max, s.nodes[i + iId]!);
  }
  return max;
}

function retainers(file: string, ctor: string, paths: number, newerThan: number): void {
  const s = JSON.parse(fs.readFileSync(file, "utf8")) as Snapshot & {
    snapshot: { meta: { edge_fields: string[]; edge_types: [string[], ...unknown[]] } };
    edges: number[];
  };
  const nf = s.snapshot.meta.node_fields;
  const ef = s.snapshot.meta.edge_fields;
  const nodeTypes = s.snapshot.meta.node_types[0];
  const edgeTypes = s.snapshot.meta.edge_types[0];
  const [nw, ew] = [nf.length, ef.length];
  const [iType, iName, iEdges, iId] = [nf.indexOf("type"), nf.indexOf("name"), nf.indexOf("edge_count"), nf.indexOf("id")];
  const [eType, eName, eTo] = [ef.indexOf("type"), ef.indexOf("name_or_index"), ef.indexOf("to_node")];
  const count = s.nodes.length / nw;
  const firstEdge = new Uint32Array(count + 1);
  for (let n = 0, e = 0; n < count; n++) {
    firstEdge[n] = e;
    e += s.nodes[n * nw + iEdges]! * ew;
    firstEdge[n + 1] = e;
  }
  const parent = new Int32Array(count).fill(-1);
  const parentEdge = new Int32Array(count).fill(-1);
  parent[0] = 0;
  const queue = [0];
  for (let q = 0; q < queue.length; q++) {
    const n = queue[q]!;
    for (let e = firstEdge[n]!; e < firstEdge[n + 1]!; e += ew) {
      if (edgeTypes[s.edges[e + eType]!] === "weak") continue;
      const to = s.edges[e + eTo]! / nw;
      if (parent[to] !== -1) continue;
      parent[to] = n;
      parentEdge[to] = e;
      queue.push(to);
    }
  }
  const label = (n: number) => `${nodeTypes[s.nodes[n * nw + iType]!]} ${s.strings[s.nodes[n * nw + iName]!]!.slice(0, 60)}`;
  const edgeLabel = (e: number) => {
    const t = edgeTypes[s.edges[e + eType]!];
    const v = s.edges[e + eName]!;
    return t === "element" || t === "hidden" ? `[${v}]` : `.${s.strings[v]}`;
  };
  let shown = 0;
  for (let n = 0; n < count && shown < paths; n++) {
    const type = nodeTypes[s.nodes[n * nw + iType]!];
    // "(concatenated string)", "(array)"…: nodes of that type; otherwise objects of that constructor.
    const match = ctor.startsWith("(") ? `(${type})` === ctor : type === "object" && s.strings[s.nodes[n * nw + iName]!] === ctor;
    // Only objects made after the early snapshot (heap snapshot ids grow and stay with an object in one process).
    if (!match || parent[n] === -1 || s.nodes[n * nw + iId]! <= newerThan) continue;
    const chain: string[] = [];
    for (let m = n; m !== 0; m = parent[m]!) chain.unshift(`${edgeLabel(parentEdge[m]!)} → ${label(m)}`);
    process.stdout.write(`\n${ctor} #${++shown}:\n  ${chain.join("\n  ")}\n`);
  }
}
