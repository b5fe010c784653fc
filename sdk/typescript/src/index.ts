// capsem for Node.js: drive long-lived capsem sandboxes over their
// supervisor's unix socket (docs/API.md), no runtime dependencies.
//
//   import { Sandbox } from "capsem";
//   const sb = await Sandbox.start("task-1", { secrets: ["ANTHROPIC_API_KEY"] });
//   const r = await sb.exec(["pytest", "-q"], { timeout: 600 });
//   console.log(r.exitCode, r.stdout.toString());
//   await sb.rm({ force: true });

export {
  Sandbox, AskHandler, ls, EXIT_TIMEOUT, MAX_BUFFERED,
  type Answer, type Decide, type ExecOptions, type ForkOptions, type JSONObject, type Result, type Secrets,
  type StartOptions, type StreamOptions, type Where,
} from "./sandbox.js";
export { ExecStream, EXEC_PROTOCOL, type Chunk, type Exit } from "./exec.js";
export {
  CapsemError, SandboxNotFound, SandboxNotRunning, AlreadyRunning, PolicyError, TooLarge, APIError, CLIError,
  ForeignServer,
} from "./errors.js";
export { VERSION } from "./version.js";
