/**
 * A histogram for the per-request hot path, registered in a prom-client
 * Registry like its own metrics. prom-client's Histogram validates and
 * hashes the label object on every observe(); here the caller names the
 * series with a string key it builds cheaply, the labels object is made once
 * per series, and an observation is a bucket search and three additions
 * (bench/observability.bench.ts measured the difference). The text it
 * exposes is prom-client's: cumulative `_bucket{…,le}`, `_sum`, `_count`.
 */
import type { Metric } from "prom-client";

/** One exposed line, as prom-client's Registry reads it from a metric's get(). */
interface ValueLine {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

interface Series {
  labels: Record<string, string>;
  counts: number[];
  sum: number;
  count: number;
}

export class FastHistogram {
  private readonly series = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly buckets: readonly number[],
  ) {}

  /** One observation of the series `key`; `labels` is called only for a key not seen before. */
  observe(key: string, labels: () => Record<string, string>, value: number): void {
    let s = this.series.get(key);
    if (!s) {
      s = { labels: labels(), counts: new Array<number>(this.buckets.length).fill(0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    const buckets = this.buckets;
    for (let i = 0; i < buckets.length; i++) {
      if (value <= buckets[i]!) {
        s.counts[i]!++;
        break;
      }
    }
    s.sum += value;
    s.count++;
  }

  /** What prom-client's Registry reads (same shape as its own histograms). */
  get(): Promise<{ name: string; help: string; type: "histogram"; values: ValueLine[]; aggregator: "sum" }> {
    const values: ValueLine[] = [];
    for (const s of this.series.values()) {
      let cumulative = 0;
      this.buckets.forEach((le, i) => {
        cumulative += s.counts[i]!;
        values.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le }, value: cumulative });
      });
      values.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le: "+Inf" }, value: s.count });
      values.push({ metricName: `${this.name}_sum`, labels: s.labels, value: s.sum });
      values.push({ metricName: `${this.name}_count`, labels: s.labels, value: s.count });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: "histogram", values, aggregator: "sum" });
  }

  reset(): void {
    this.series.clear();
  }

  /** As the Registry's registerMetric() takes it. */
  asMetric(): Metric {
    return this as unknown as Metric;
  }
}
