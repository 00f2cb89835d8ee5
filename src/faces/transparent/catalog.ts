/**
 * Naming for a transparent face. `server` faces expose an upstream's names
 * unchanged; the `all` face prefixes them `<server><sep><name>` (servers in
 * sorted order, each upstream's own order kept) and resolves them back.
 * `virtual` faces (/v/<name>/mcp) serve the upstreams of a virtual server's
 * chosen tools; their names are the curation's (curated.ts).
 */
import { ErrorCodes, GatewayError } from "../../errors.js";

export type FaceTarget = { kind: "server"; server: string } | { kind: "all"; separator: string } | { kind: "virtual"; name: string };

export class Catalog {
  constructor(
    readonly target: FaceTarget,
    private readonly registryNames: () => string[],
    /** A virtual face's upstreams, as its config names them now (it may change on reload). */
    private readonly chosenServers: () => readonly string[] = () => [],
  ) {}

  servers(): string[] {
    if (this.target.kind === "server") return [this.target.server];
    const known = [...this.registryNames()].sort();
    if (this.target.kind === "all") return known;
    const chosen = this.chosenServers();
    return known.filter((s) => chosen.includes(s));
  }

  expose(server: string, name: string): string {
    return this.target.kind === "all" ? `${server}${this.target.separator}${name}` : name;
  }

  /** Maps an exposed name back to its server; the longest matching server name wins. */
  resolve(exposed: string, what: "tool" | "prompt"): { server: string; name: string } {
    if (this.target.kind === "server") return { server: this.target.server, name: exposed };
    if (this.target.kind === "virtual") {
      throw new GatewayError(
        what === "tool" ? ErrorCodes.UNKNOWN_TOOL : ErrorCodes.UNKNOWN_PROMPT,
        `unknown ${what} '${exposed}' on virtual server '${this.target.name}'`,
        {
          details: { [what]: exposed },
        },
      );
    }
    const sep = this.target.separator;
    const match = this.servers()
      .filter((s) => exposed.startsWith(s + sep) && exposed.length > s.length + sep.length)
      .sort((a, b) => b.length - a.length)[0];
    if (!match) {
      throw new GatewayError(
        what === "tool" ? ErrorCodes.UNKNOWN_TOOL : ErrorCodes.UNKNOWN_PROMPT,
        `unknown ${what} '${exposed}': names on this endpoint are '<server>${sep}<name>' with server one of ${this.servers().join(", ") || "(none)"}`,
        { details: { [what]: exposed } },
      );
    }
    return { server: match, name: exposed.slice(match.length + sep.length) };
  }

  /** Throws when two upstream items end up with the same exposed name. */
  assertUnique(items: Array<{ exposed: string; server: string }>, what: string): void {
    const seen = new Map<string, string>();
    for (const { exposed, server } of items) {
      const other = seen.get(exposed);
      if (other !== undefined) {
        throw new GatewayError(
          ErrorCodes.NAME_COLLISION,
          `${what} name collision: '${exposed}' is exposed by both '${other}' and '${server}'. Rename one server or set gateway.transparent.separator to a string neither uses.`,
          { details: { name: exposed, servers: [other, server] } },
        );
      }
      seen.set(exposed, server);
    }
  }
}

const PAGE_SIZE = 200;

/** Offset pagination for aggregated lists. */
export function paginate<T>(items: T[], cursor: string | undefined): { page: T[]; nextCursor?: string } {
  let offset = 0;
  if (cursor !== undefined) {
    const parsed = Number(Buffer.from(cursor, "base64url").toString("utf8"));
    if (!Number.isInteger(parsed) || parsed < 0 || parsed > items.length) {
      throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `invalid cursor '${cursor}': pass the nextCursor of a previous list response`, { details: { cursor } });
    }
    offset = parsed;
  }
  const page = items.slice(offset, offset + PAGE_SIZE);
  const next = offset + PAGE_SIZE;
  return next < items.length ? { page, nextCursor: Buffer.from(String(next)).toString("base64url") } : { page };
}
