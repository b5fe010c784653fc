// The capsem CLI, for what needs a process of its own: start, stop, rm,
// ls, snapshots, suspend.

import { spawn } from "node:child_process";
import { CLIError } from "./errors.js";

/** The capsem binary: given, $CAPSEM_BIN, or capsem on PATH. */
export function capsemBin(explicit?: string): string {
  return explicit || process.env.CAPSEM_BIN || "capsem";
}

/** The data directory: given, $CAPSEM_DATA, or capsem's default. */
export function dataDir(explicit?: string): string | undefined {
  return explicit || process.env.CAPSEM_DATA || undefined;
}

/**
 * Runs `capsem SUB [--data D] ARGS…` (args[0] is the subcommand) and
 * resolves with its stdout; a failure rejects with CLIError. extraEnv is
 * added to this process's environment for it (secret values: never argv).
 */
export function cli(capsem: string, args: string[], data?: string, extraEnv?: Record<string, string>): Promise<string> {
  const full = [args[0], ...(data ? ["--data", data] : []), ...args.slice(1)];
  return new Promise((resolve, reject) => {
    const p = spawn(capsem, full, {
      stdio: ["ignore", "pipe", "pipe"],
      env: extraEnv && Object.keys(extraEnv).length ? { ...process.env, ...extraEnv } : process.env,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    p.stdout.on("data", (b: Buffer) => out.push(b));
    p.stderr.on("data", (b: Buffer) => err.push(b));
    p.on("error", (e: NodeJS.ErrnoException) => {
      reject(e.code === "ENOENT"
        ? new CLIError(127, `${capsem} not found: pass capsem: PATH, set CAPSEM_BIN, or put capsem on PATH`, full)
        : e);
    });
    p.on("close", (code: number | null) => {
      if (code === 0) resolve(Buffer.concat(out).toString());
      else reject(new CLIError(code ?? -1, Buffer.concat(err).toString(), full));
    });
  });
}
