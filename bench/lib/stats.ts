/** Small statistics and formatting helpers for the benchmark report. */

/** Nearest-rank percentile (p in 0..100) of unsorted samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export function fmt(n: number, digits = 2): string {
  if (!Number.isFinite(n)) return "n/a";
  return n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** "×1.23" ratio of value to reference, or "" when there is none. */
export function ratio(value: number, reference: number | undefined): string {
  if (reference === undefined || !Number.isFinite(reference) || reference === 0 || !Number.isFinite(value)) return "";
  return ` (×${fmt(value / reference, 2)})`;
}

export function kb(bytes: number): string {
  return `${fmt(bytes / 1024, 1)} KB`;
}

export function mb(bytes: number): string {
  return `${fmt(bytes / 1048576, 1)} MB`;
}

/** A markdown table. */
export function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const line = (cells: readonly string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}
