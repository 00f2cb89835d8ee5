/**
 * The `gateway.codeMode` settings (issue 26, docs/adr/0028-code-mode-sandbox.md):
 * the bounds of one `run_code` script. Each bound exceeded ends the run with
 * EMCP_CODE_LIMIT naming the bound and the setting.
 */
import { z } from "zod";

export const codeModeSchema = z
  .strictObject({
    /** false: the meta face has no run_code tool. */
    enabled: z.boolean().default(true),
    /** The whole run, waiting on mcp.* calls included; a run past its timeout_ms goes on as a task until this bound. */
    wallTimeMs: z.number().int().min(100).max(1_800_000).default(300_000),
    /** The script's own computing, summed over the run; the gateway's event loop waits while a script computes, so keep it short. */
    cpuTimeMs: z.number().int().min(10).max(60_000).default(1_000),
    /**
     * How far the run's WebAssembly memory may grow beyond its first 16 MiB (the engine and about 11 MiB of heap):
     * the script's objects, strings and the replies of its calls get about 11 MiB plus this.
     */
    memoryBytes: z
      .number()
      .int()
      .min(1024 * 1024)
      .max(1024 * 1024 * 1024)
      .default(32 * 1024 * 1024),
    /**
     * The script's stack (recursion beyond it is a stack overflow; 256 KiB is about 1,300 plain calls deep). At most
     * 256 KiB: the WebAssembly frames run on V8's own stack, which a deeper QuickJS stack would overflow first.
     */
    stackBytes: z
      .number()
      .int()
      .min(32 * 1024)
      .max(256 * 1024)
      .default(256 * 1024),
    /** mcp.* calls (call, readResource, getPrompt, listTools, search) one run may make. */
    maxCalls: z.number().int().min(1).max(10_000).default(100),
    /** The console output and the JSON of the result together, in UTF-8 bytes. */
    maxOutputBytes: z
      .number()
      .int()
      .min(1024)
      .max(64 * 1024 * 1024)
      .default(256 * 1024),
    /** The longest script accepted, in characters. */
    maxCodeChars: z.number().int().min(100).max(1_000_000).default(100_000),
  })
  .prefault({});

export type CodeModeSettings = z.infer<typeof codeModeSchema>;
