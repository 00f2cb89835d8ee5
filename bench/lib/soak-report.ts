/**
 * The soak bench's curve (bench/soak.bench.ts): per-quarter RSS floors and a
 * row per `step` minutes, from its samples. A quarter's floor is the median
 * of its minutes' low points — the RSS left after each collection — so one
 * compaction that returns memory to the OS does not decide it; its lowest
 * sample is shown too. Also a script, for a run cut short or still running:
 * `node --import tsx bench/lib/soak-report.ts <out>/samples.csv [minutes]`.
 */
import fs from "node:fs";
import { fileURLToPath } from "node:url";
import { fmt, table } from "./stats.js";

export interface SoakSample {
  /** Minutes since the start. */
  min: number;
  rss: number;
  heapUsed: number;
  calls?: number | undefined;
  churned?: number | undefined;
}

const MiB = (b: number) => fmt(b / 1048576, 1);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** Each whole minute's lowest RSS within [from, to). */
function minuteLows(samples: readonly SoakSample[], from: number, to: number): number[] {
  const lows = new Map<number, number>();
  for (const s of samples) if (s.min >= from && s.min < to) lows.set(Math.floor(s.min), Math.min(lows.get(Math.floor(s.min)) ?? Infinity, s.rss));
  return [...lows.values()];
}

/** Markdown lines: the quarters, the verdict (last quarter's floor against the second's), and the curve by `step` minutes. */
export function soakReport(samples: readonly SoakSample[], minutes: number, step = 5): string[] {
  const quarter = (q: number) => [(q * minutes) / 4, ((q + 1) * minutes) / 4] as const;
  const rows = [0, 1, 2, 3].map((q) => {
    const [from, to] = quarter(q);
    const qs = samples.filter((s) => s.min >= from && s.min < to);
    const rss = qs.map((s) => s.rss);
    return [
      `Q${q + 1} (${fmt(from, Number.isInteger(from) ? 0 : 1)}–${fmt(to, Number.isInteger(to) ? 0 : 1)} min)`,
      MiB(median(minuteLows(samples, from, to))),
      MiB(Math.min(...rss)),
      MiB(rss.reduce((a, b) => a + b, 0) / Math.max(1, rss.length)),
      MiB(Math.max(...rss)),
      MiB(Math.min(...qs.map((s) => s.heapUsed))),
      String(qs.length),
    ];
  });
  const floor = (q: number) => median(minuteLows(samples, ...quarter(q)));
  const ratio = floor(3) / floor(1);
  const curve: string[][] = [];
  for (let from = 0; from < minutes; from += step) {
    const part = samples.filter((s) => s.min >= from && s.min < from + step);
    if (part.length === 0) continue;
    const last = part[part.length - 1]!;
    curve.push([
      `${from}–${from + step}`,
      MiB(Math.min(...part.map((s) => s.rss))),
      MiB(Math.max(...part.map((s) => s.rss))),
      MiB(Math.min(...part.map((s) => s.heapUsed))),
      String(last.calls ?? ""),
      String(last.churned ?? ""),
    ]);
  }
  return [
    table(["quarter", "RSS floor MiB (median of minute lows)", "lowest MiB", "mean MiB", "peak MiB", "heap used, lowest MiB", "samples"], rows),
    "",
    `Last quarter's floor / second quarter's: ×${fmt(ratio, 3)} (${ratio <= 1.1 ? "flat: within 10 %" : "NOT within 10 %"}).`,
    "",
    table(["minutes", "RSS low MiB", "RSS high MiB", "heap used, lowest MiB", "calls so far", "churned so far"], curve),
  ];
}

/** Samples from the bench's samples.csv. */
export function readSamples(file: string): SoakSample[] {
  const [header, ...lines] = fs.readFileSync(file, "utf8").trim().split("\n");
  const cols = header!.split(",");
  const at = (cells: string[], name: string) => Number(cells[cols.indexOf(name)]);
  return lines.map((l) => {
    const c = l.split(",");
    return { min: at(c, "minute"), rss: at(c, "rss_bytes"), heapUsed: at(c, "heap_used_bytes"), calls: at(c, "calls"), churned: at(c, "churned") };
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [file, minutes] = process.argv.slice(2);
  if (!file) throw new Error("usage: bench/lib/soak-report.ts <samples.csv> [minutes]");
  const samples = readSamples(file);
  const span = minutes ? Number(minutes) : Math.ceil(samples[samples.length - 1]?.min ?? 0);
  process.stdout.write(soakReport(samples, span).join("\n") + "\n");
}
