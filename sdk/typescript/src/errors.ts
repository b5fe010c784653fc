// The errors the client throws: one base class, and one class per thing a
// caller would handle differently (the Python client's, by the same names).

/** Base of every error this package throws. */
export class CapsemError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** No sandbox of that name exists (Sandbox.start creates it). */
export class SandboxNotFound extends CapsemError {}

/** The sandbox exists but is stopped, suspended or crashed (Sandbox.start starts it). */
export class SandboxNotRunning extends CapsemError {}

/** Sandbox.start of a sandbox that is already running. */
export class AlreadyRunning extends CapsemError {}

/** A policy reload was refused; the policy in force is kept. The message names the file and line. */
export class PolicyError extends CapsemError {}

/** A file too large to return in memory (getFile without a sink); stream it instead. */
export class TooLarge extends CapsemError {}

/** An error answer of the sandbox's API (docs/API.md): status is the HTTP status. */
export class APIError extends CapsemError {
  constructor(readonly status: number, readonly detail: string) {
    super(`${detail} (HTTP ${status})`);
  }
}

/** The capsem command failed: code is its exit status, stderr what it said. */
export class CLIError extends CapsemError {
  constructor(readonly code: number, readonly stderr: string, readonly argv: string[]) {
    super(`capsem ${argv.join(" ")}: exit ${code}: ${stderr.trim()}`);
  }
}

/**
 * The sandbox's socket is not this user's: its file or its directory
 * belongs to another user, or the directory is open to others. Nothing was
 * sent to it.
 */
export class ForeignServer extends CapsemError {
  constructor(readonly socket: string, why: string) {
    super(`${socket}: ${why}: nothing was sent to it. Another user may have taken the sandbox's socket: ` +
      "remove the socket and its directory if they are not yours, and start the sandbox again");
  }
}
