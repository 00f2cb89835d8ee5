/**
 * The layers of src/ point one way (docs/design/layers.md): every import
 * between folders goes to a lower floor, and no files import each other in a
 * loop. The imports are read afresh from the source with the TypeScript
 * parser, so the rule cannot drift from the code, and the floors are written
 * out below rather than in a lint config, so loosening them shows up as a
 * diff of this file.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const SRC = path.join(ROOT, "src");

/**
 * The floors, from the ground up. A unit is a folder of src/ ("store/") or a
 * file at its top ("errors.ts"). A unit may import only units on LOWER floors;
 * two units on one floor may not import each other. A new folder fails the
 * first test until it is given a floor here (and in docs/design/layers.md).
 */
const FLOORS: readonly (readonly string[])[] = [
  ["clock.ts", "logging.ts", "error-codes.ts"],
  ["errors.ts"],
  ["config/"],
  ["store/"],
  ["auth/"],
  ["mcp/", "governance/"],
  ["upstream/"],
  ["tasks/"],
  ["session/"],
  ["http/"],
  ["faces/", "cluster/", "observability/"],
  ["console/"],
  ["server/"],
  ["cli/", "index.ts"],
];

interface Import {
  from: string;
  to: string;
  line: number;
  /** `import type` / `export type` (or a type query): erased at run time. */
  typeOnly: boolean;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sourceFiles(full));
    else if (name.endsWith(".ts") && !name.endsWith(".d.ts")) out.push(full);
  }
  return out;
}

const rel = (file: string): string => path.relative(ROOT, file).split(path.sep).join("/");

/** The unit of a src/ file: its top folder ("store/") or, at the top, its name. */
function unitOf(file: string): string {
  const [first, ...rest] = path.relative(SRC, file).split(path.sep);
  return rest.length ? `${first}/` : first!;
}

/** Relative imports that name no file of src/ (tsc says so too; here they would be edges to nowhere). */
const UNRESOLVED: string[] = [];

/** The file a relative specifier names ("./x.js" is x.ts, as NodeNext resolves it). */
function resolve(from: string, spec: string): string | undefined {
  const base = path.resolve(path.dirname(from), spec);
  const candidates = [base.replace(/\.js$/, ".ts"), base, `${base}.ts`, path.join(base, "index.ts")];
  return candidates.find((c) => c.startsWith(SRC + path.sep) && existsSync(c) && statSync(c).isFile());
}

/** Every import, export-from, dynamic import() and import("...") type of the file that names another file of src/. */
function importsOf(file: string): Import[] {
  const text = readFileSync(file, "utf8");
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: Import[] = [];
  const add = (node: ts.Node, spec: ts.Expression | undefined, typeOnly: boolean): void => {
    if (!spec || !ts.isStringLiteralLike(spec) || !spec.text.startsWith(".")) return;
    const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
    const to = resolve(file, spec.text);
    if (to === undefined) UNRESOLVED.push(`${rel(file)}:${line} imports "${spec.text}"`);
    else out.push({ from: rel(file), to: rel(to), line, typeOnly });
  };
  const visit = (node: ts.Node): void => {
    // `import { type A } from` still loads the module under verbatimModuleSyntax: only a whole `import type` is erased.
    if (ts.isImportDeclaration(node)) add(node, node.moduleSpecifier, node.importClause?.isTypeOnly === true);
    else if (ts.isExportDeclaration(node)) add(node, node.moduleSpecifier, node.isTypeOnly);
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add(node, node.arguments[0], false);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node, node.argument.literal, true);
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

const FILES = sourceFiles(SRC);
const IMPORTS = FILES.flatMap(importsOf);
const FLOOR_OF = new Map(FLOORS.flatMap((units, i) => units.map((u) => [u, i + 1] as const)));

function upwardImports(): Import[] {
  return IMPORTS.filter((i) => {
    const a = unitOf(path.join(ROOT, i.from));
    const b = unitOf(path.join(ROOT, i.to));
    return a !== b && (FLOOR_OF.get(b) ?? Infinity) >= (FLOOR_OF.get(a) ?? -Infinity);
  });
}

function describeImport(i: Import): string {
  const a = unitOf(path.join(ROOT, i.from));
  const b = unitOf(path.join(ROOT, i.to));
  return `${i.from}:${i.line} imports ${i.to}${i.typeOnly ? " (type only)" : ""}: ${a} is on floor ${FLOOR_OF.get(a)}, ${b} on floor ${FLOOR_OF.get(b)}`;
}

/** Strongly connected components of more than one file (or a file importing itself), by Tarjan's algorithm. */
function cycles(edges: readonly Import[]): string[][] {
  const next = new Map<string, Set<string>>();
  for (const e of edges) {
    let set = next.get(e.from);
    if (!set) next.set(e.from, (set = new Set()));
    set.add(e.to);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  const connect = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || next.get(v)?.has(v)) found.push(component.sort());
  };
  for (const file of FILES.map(rel)) if (!index.has(file)) connect(file);
  return found;
}

function describeCycle(component: readonly string[]): string {
  const inside = new Set(component);
  const ties = IMPORTS.filter((i) => inside.has(i.from) && inside.has(i.to)).map(
    (i) => `  ${i.from}:${i.line} imports ${i.to}${i.typeOnly ? " (type only)" : ""}`,
  );
  return `a cycle of ${component.length} files:\n${ties.join("\n")}`;
}

test("every folder and top-level file of src/ stands on exactly one floor", () => {
  const units = new Set(FILES.map(unitOf));
  const listed = FLOORS.flat();
  const twice = listed.filter((u, i) => listed.indexOf(u) !== i);
  assert.deepEqual(twice, [], `on more than one floor: ${twice.join(", ")}`);
  const missing = [...units].filter((u) => !FLOOR_OF.has(u));
  assert.deepEqual(missing, [], `src/ has units with no floor in FLOORS (test/unit/layering.test.ts and docs/design/layers.md): ${missing.join(", ")}`);
  const stale = listed.filter((u) => !units.has(u));
  assert.deepEqual(stale, [], `FLOORS names units src/ no longer has: ${stale.join(", ")}`);
});

test("the parser sees the imports (a sanity check that the rule is not vacuous)", () => {
  assert.deepEqual(UNRESOLVED, [], "relative imports that name no file of src/");
  assert.ok(FILES.length > 100, `only ${FILES.length} files read from src/`);
  assert.ok(IMPORTS.length > FILES.length, `only ${IMPORTS.length} imports read`);
  assert.ok(
    IMPORTS.some((i) => i.from === "src/server/gateway.ts" && i.to === "src/http/server.ts"),
    "the import of src/http/server.ts by src/server/gateway.ts was not seen",
  );
  assert.ok(IMPORTS.some((i) => i.typeOnly) && IMPORTS.some((i) => !i.typeOnly), "type-only and value imports are not told apart");
});

test("imports between folders point down (type-only imports too)", () => {
  const bad = upwardImports();
  assert.equal(bad.length, 0, `${bad.length} import(s) run upward or sideways (docs/design/layers.md):\n${bad.map(describeImport).join("\n")}`);
});

test("no files import each other in a loop (type-only imports too)", () => {
  const bad = cycles(IMPORTS);
  assert.equal(bad.length, 0, `${bad.length} cycle(s) of imports (docs/design/layers.md):\n${bad.map(describeCycle).join("\n")}`);
});
