// Type-checked lint for src, test and bench (typescript-eslint). Prettier owns formatting.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "coverage/", "**/*.mjs", "eslint.config.js"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": [
        "error",
        // node:test's test()/describe() return promises the runner itself awaits.
        {
          allowForKnownSafeCalls: [
            { from: "package", package: "node:test", name: ["test", "it", "describe", "suite", "before", "after", "beforeEach", "afterEach"] },
          ],
        },
      ],
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/switch-exhaustiveness-check": ["error", { considerDefaultExhaustiveForUnions: true }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", destructuredArrayIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      // Async methods that implement async contracts (stores, handlers) need no await: `async` turns a throw into a rejection.
      "@typescript-eslint/require-await": "off",
      // The SDK types McpError.code as number and ErrorCode as a numeric enum: comparing them is the intended use.
      "@typescript-eslint/no-unsafe-enum-comparison": "off",
      // One SQLite library per process (src/store/sqlite/driver.ts, ADR 0020): a second copy on the same file
      // (better-sqlite3 12 beside 13 on Node 22+) breaks SQLite's per-process POSIX locks and WAL bookkeeping.
      "@typescript-eslint/no-restricted-imports": [
        "error",
        {
          paths: [{ name: "better-sqlite3", message: "Open SQLite files with openSqliteDatabase() from src/store/sqlite/driver.ts.", allowTypeImports: true }],
        },
      ],
    },
  },
  {
    // Tests read raw JSON-RPC off the wire; typing every probe would hide what is asserted.
    files: ["test/**/*.ts", "bench/**/*.ts"],
    rules: {
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-return": "off",
    },
  },
);
