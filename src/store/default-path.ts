/**
 * Where a SQLite store lives when no path is given. Its own module so that
 * the CLI's --help can name it without loading the stores
 * (docs/adr/0017-lazy-start.md).
 */
import os from "node:os";
import path from "node:path";

/**
 * The per-user state file: `$XDG_STATE_HOME/emceepee/emceepee.db` when
 * XDG_STATE_HOME is an absolute path (the XDG Base Directory spec ignores a
 * relative one), else `~/.local/state/emceepee/emceepee.db`.
 */
export function defaultStorePath(env: NodeJS.ProcessEnv = process.env, home: string = os.homedir()): string {
  const xdg = env.XDG_STATE_HOME;
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(home, ".local", "state");
  return path.join(base, "emceepee", "emceepee.db");
}
