/**
 * How tool text and queries become search terms (docs/adr/0026): identifiers
 * split at `_`, `-`, `.`, `/` and camelCase humps (`readFile`, `read_file` and
 * `read-file` all give "read", "file"), lower case, common English words
 * dropped, and a light suffix strip so "files", "listing" and "listed" meet
 * "file" and "list". The same functions run over documents and queries.
 */

const STOP_WORDS = new Set(
  (
    "a an and are as at be by can do for from has have how i in into is it its me my of on or so that the this to was what when " +
    "which who will with you your all any use used using tool tools want need please"
  ).split(" "),
);

/** Splits text and identifiers into words. */
export function tokenize(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w.length > 0);
}

/** One word → its search term, or null for a stop word. */
export function searchTerms(word: string): string | null {
  const w = word.toLowerCase();
  if (STOP_WORDS.has(w)) return null;
  return stem(w);
}

/** The query's terms as the index sees them (an empty list: nothing searchable). */
export function queryTerms(query: string): string[] {
  return tokenize(query)
    .map(searchTerms)
    .filter((t): t is string => t !== null);
}

function stem(w: string): string {
  if (w.length <= 3 || /\d/.test(w)) return w;
  const s = strip(w);
  // "create", "created", "creating" → "creat".
  return s.length > 4 && s.endsWith("e") ? s.slice(0, -1) : s;
}

function strip(w: string): string {
  if (w.endsWith("ies") && w.length > 4) return `${w.slice(0, -3)}y`;
  if (w.endsWith("ing") && w.length > 5) return undouble(w.slice(0, -3));
  if (w.endsWith("ed") && w.length > 4) return undouble(w.slice(0, -2));
  if (/(ss|us|is)$/.test(w)) return w;
  if (/(ches|shes|xes|sses)$/.test(w)) return w.slice(0, -2);
  if (w.endsWith("s")) return w.slice(0, -1);
  return w;
}

/** "stopp" → "stop", "listt" never happens but "runn" → "run". */
function undouble(w: string): string {
  return /([bdgmnprt])\1$/.test(w) ? w.slice(0, -1) : w;
}
