/**
 * A bench's numeric options: `--name=value` on the command line, else
 * `BENCH_NAME` in the environment (dashes as underscores), else the default.
 * A value that is not a whole number of at least `min` stops the bench with a
 * message naming the option.
 */
export function option(name: string, fallback: number, min = 1): number {
  const flag = process.argv.find((a) => a.startsWith(`--${name}=`));
  const raw = flag ? flag.slice(name.length + 3) : process.env[`BENCH_${name.toUpperCase().replace(/-/g, "_")}`];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be a whole number of at least ${min}, got '${raw}'`);
  return n;
}
