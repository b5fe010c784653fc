// Sandbox: one long-lived capsem sandbox, driven through its supervisor's
// API (docs/API.md) for commands and files, and through the capsem CLI for
// what needs a process of its own (start, stop, rm).

import type { Readable, Writable } from "node:stream";
import { once } from "node:events";
import { capsemBin, cli, dataDir } from "./cli.js";
import { AlreadyRunning, APIError, CapsemError, CLIError, PolicyError, SandboxNotFound, SandboxNotRunning, TooLarge } from "./errors.js";
import { ExecStream, type Exit } from "./exec.js";
import { check, json, lines, readAll, send, type Body } from "./http.js";

/** A command's exit code after its timeout. */
export const EXIT_TIMEOUT = 124;

/**
 * What exec() keeps of each of stdout and stderr, and the most getFile()
 * returns in memory: the Go API's buffered exec cut (maxBufferedOutput in
 * sandbox/api/exec.go; sandbox/api/clientcap_test.go checks it). execStream() and getFile(path, sink) stream any amount.
 */
export const MAX_BUFFERED = 16 << 20;

/** A JSON object as the API answers it. */
export type JSONObject = Record<string, unknown>;

/**
 * Credentials the guest never holds, as capsem's --secret: "NAME" (a
 * well-known one, ANTHROPIC_API_KEY → api.anthropic.com) or "NAME@HOST,…",
 * their values this process's variables of those names; or an object of
 * such specs to values (given to capsem in its environment, never its
 * argv). The guest gets a placeholder, replaced by the value only in
 * requests to the secret's hosts.
 */
export type Secrets = string[] | Record<string, string>;

/** Where and as whom: the data directory and the capsem binary. */
export interface Where {
  data?: string;
  capsem?: string;
}

export interface StartOptions extends Where {
  policy?: string;
  workspace?: string;
  /** Variables for every command in the sandbox (not credentials: see secrets). */
  env?: Record<string, string>;
  secrets?: Secrets;
  cpus?: number;
  memory?: number;
  disk?: number;
  caDir?: string;
  /** Port specs, "[HOSTIP:]HOSTPORT:GUESTPORT" (HOSTPORT 0: a free one), kept for later starts. */
  publish?: string[];
}

export interface ForkOptions {
  tag?: string;
  policy?: string;
  workspace?: string;
  env?: Record<string, string>;
  secrets?: Secrets;
  disk?: number;
  caDir?: string;
}

export interface ExecOptions {
  env?: Record<string, string>;
  /** Seconds; the command is killed after it (exit 124, timedOut). */
  timeout?: number;
  /** The working directory (default /workspace). */
  workdir?: string;
}

export interface StreamOptions extends ExecOptions {
  tty?: boolean;
  rows?: number;
  cols?: number;
  /** false: the command's stdin is closed with the request. */
  stdin?: boolean;
}

/** A finished command. */
export interface Result {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
  timedOut: boolean;
  /** The signal that killed it ("KILL"), if one did. */
  signal?: string;
  /** Why it did not run or did not end normally. */
  error?: string;
  /** stdout or stderr was over MAX_BUFFERED (16 MiB) and is cut there. */
  truncated: boolean;
}

/** What a question is answered with. */
export type Answer = "once" | "session" | "always" | "deny";

/** decide's answer: an Answer, true (once), false or null (deny), or a promise of one. */
export type Decide = (question: JSONObject) => Answer | boolean | null | undefined | Promise<Answer | boolean | null | undefined>;

const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function secretArgs(secrets: Secrets | undefined): [string[], Record<string, string>] {
  const args: string[] = [];
  const values: Record<string, string> = {};
  if (!secrets) return [args, values];
  const specs = Array.isArray(secrets) ? secrets : Object.keys(secrets);
  for (const spec of specs) {
    const name = spec.split("@", 1)[0];
    if (!SECRET_NAME.test(name)) {
      throw new TypeError(`secret ${JSON.stringify(spec)}: NAME must be an environment variable name, as in "ANTHROPIC_API_KEY" or "MY_TOKEN@api.example.com"`);
    }
    args.push("--secret", spec);
    if (!Array.isArray(secrets)) values[name] = secrets[spec];
  }
  return [args, values];
}

function flags(pairs: Array<[string, string | number | undefined]>, env?: Record<string, string>): string[] {
  const out: string[] = [];
  for (const [flag, v] of pairs) if (v !== undefined) out.push(flag, String(v));
  for (const [k, v] of Object.entries(env ?? {})) out.push("--env", `${k}=${v}`);
  return out;
}

function envList(env?: Record<string, string>): string[] {
  return Object.entries(env ?? {}).map(([k, v]) => `${k}=${v}`);
}

/** Every sandbox, as `capsem ls --json` gives it. */
export async function ls(where: Where = {}): Promise<JSONObject[]> {
  return JSON.parse(await cli(capsemBin(where.capsem), ["ls", "--json"], dataDir(where.data))) as JSONObject[];
}

/** A sandbox by name: Sandbox.start(name, …) creates or starts one; new Sandbox(name) attaches to one that runs. */
export class Sandbox {
  readonly data: string | undefined;
  readonly capsem: string;
  private sock: string | undefined;

  constructor(readonly name: string, where: Where = {}) {
    this.data = dataDir(where.data);
    this.capsem = capsemBin(where.capsem);
  }

  /**
   * Creates sandbox name the first time, or starts it again with what it
   * kept; resolves once its guest answers. Options given to a restart
   * replace the stored ones.
   */
  static async start(name: string, opts: StartOptions = {}): Promise<Sandbox> {
    const sb = new Sandbox(name, opts);
    const [sargs, values] = secretArgs(opts.secrets);
    const args = ["start", ...flags([["--policy", opts.policy], ["--workspace", opts.workspace], ["--cpus", opts.cpus],
      ["--memory", opts.memory], ["--disk", opts.disk], ["--ca-dir", opts.caDir]], opts.env), ...sargs];
    for (const spec of opts.publish ?? []) args.push("--publish", spec);
    try {
      await cli(sb.capsem, [...args, name], sb.data, values);
    } catch (e) {
      if (e instanceof CLIError && e.code === 1 && e.stderr.includes("already running")) throw new AlreadyRunning(e.stderr.trim());
      throw e;
    }
    return sb;
  }

  /** The API socket, from capsem ls (once; again after the sandbox went away). */
  private async socket(): Promise<string> {
    if (this.sock) return this.sock;
    for (const s of await ls({ data: this.data, capsem: this.capsem })) {
      if (s.name !== this.name) continue;
      if (s.state !== "running") throw new SandboxNotRunning(`sandbox ${this.name} is ${s.state}: Sandbox.start(${JSON.stringify(this.name)}) starts it`);
      this.sock = String(s.socket);
      return this.sock;
    }
    throw new SandboxNotFound(`no sandbox ${this.name}: Sandbox.start(${JSON.stringify(this.name)}) creates it`);
  }

  /** Runs f with the socket; one gone since it was looked up becomes the typed error of why. */
  private async with<T>(f: (sock: string) => Promise<T>): Promise<T> {
    try {
      return await f(await this.socket());
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ECONNREFUSED") {
        this.sock = undefined;
        await this.socket();
      }
      throw e;
    }
  }

  private api(method: string, url: string, obj?: unknown): Promise<unknown> {
    return this.with((sock) => json(sock, method, url, obj));
  }

  /** GET /v1/sandbox: the sandbox's status. */
  async status(): Promise<JSONObject> {
    return (await this.api("GET", "/v1/sandbox")) as JSONObject;
  }

  /**
   * Runs cmd (an array of words, or a string run with sh -c) and waits for
   * it: its exit code and stdout and stderr apart, each cut at MAX_BUFFERED.
   */
  async exec(cmd: string | string[], opts: ExecOptions & { stdin?: Uint8Array | string } = {}): Promise<Result> {
    const s = await this.execStream(cmd, { ...opts, stdin: opts.stdin !== undefined });
    if (opts.stdin !== undefined) {
      s.sendStdin(opts.stdin);
      s.closeStdin();
    }
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const size = { stdout: 0, stderr: 0 };
    let truncated = false;
    for await (const c of s) {
      const room = MAX_BUFFERED - size[c.stream];
      const data = c.data.length > room ? c.data.subarray(0, room) : c.data;
      truncated ||= data.length < c.data.length;
      size[c.stream] += data.length;
      (c.stream === "stdout" ? out : err).push(data);
    }
    const x: Exit = s.exit ?? { exit_code: -1 };
    return {
      exitCode: x.exit_code, stdout: Buffer.concat(out), stderr: Buffer.concat(err), timedOut: Boolean(x.timed_out),
      signal: x.signal, error: x.error, truncated,
    };
  }

  /** Starts cmd and resolves with its ExecStream: for await over it gives {stream, data} as the command writes. */
  async execStream(cmd: string | string[], opts: StreamOptions = {}): Promise<ExecStream> {
    const req: JSONObject = { argv: typeof cmd === "string" ? ["sh", "-c", cmd] : cmd, env: envList(opts.env) };
    if (opts.workdir) req.workdir = opts.workdir;
    if (opts.timeout !== undefined) req.timeout_ms = Math.max(1, Math.round(opts.timeout * 1000));
    if (opts.tty) Object.assign(req, { tty: true, rows: opts.rows ?? 24, cols: opts.cols ?? 80 });
    return this.with((sock) => ExecStream.open(sock, req, opts.stdin === false));
  }

  /**
   * Writes data to path in the guest (absolute, or relative to
   * /workspace), its directory made first: bytes, a string, or a stream
   * (sent chunked; give size for a Content-Length). mode: "0755" or 0o755.
   */
  async putFile(path: string, data: Body, opts: { mode?: string | number; size?: number } = {}): Promise<JSONObject> {
    const q = new URLSearchParams({ path });
    if (opts.mode !== undefined) q.set("mode", typeof opts.mode === "string" ? opts.mode : opts.mode.toString(8));
    const headers: Record<string, string> = opts.size !== undefined ? { "Content-Length": String(opts.size) } : {};
    return this.with(async (sock) => {
      const res = await check(await send(sock, "PUT", `/v1/files?${q}`, data, headers));
      return JSON.parse((await readAll(res)).toString()) as JSONObject;
    });
  }

  /** The guest's file at path as a stream (any size); its length is in the answer's Content-Length. */
  async getFileStream(path: string): Promise<Readable> {
    return this.with(async (sock) => check(await send(sock, "GET", `/v1/files?${new URLSearchParams({ path })}`)));
  }

  /**
   * The guest's file at path: its bytes (over MAX_BUFFERED: TooLarge,
   * having read no more than that), or, with sink, written there as it
   * comes and its size resolved.
   */
  async getFile(path: string): Promise<Buffer>;
  async getFile(path: string, sink: Writable): Promise<number>;
  async getFile(path: string, sink?: Writable): Promise<Buffer | number> {
    const res = (await this.getFileStream(path)) as Readable & { headers: Record<string, string | undefined> };
    const want = res.headers["content-length"];
    if (!sink) {
      if (want !== undefined && Number(want) > MAX_BUFFERED) {
        res.destroy();
        throw new TooLarge(tooLarge(path, `${want} bytes`));
      }
      try {
        return await readAll(res, MAX_BUFFERED);
      } catch (e) {
        if (e instanceof RangeError) throw new TooLarge(tooLarge(path, "over that"));
        throw e;
      }
    }
    let n = 0;
    for await (const chunk of res) {
      n += (chunk as Buffer).length;
      if (!sink.write(chunk)) await once(sink, "drain");
    }
    if (want !== undefined && n !== Number(want)) throw new CapsemError(`${path}: got ${n} of ${want} bytes`);
    return n;
  }

  /**
   * The session's events after sequence number since, one object per row
   * of the SQLite export ({table: "exec_events", …}); with follow, on until
   * the sandbox stops.
   */
  async *events(opts: { since?: number; follow?: boolean } = {}): AsyncGenerator<JSONObject> {
    const q = new URLSearchParams({ since: String(opts.since ?? 0) });
    if (opts.follow) q.set("follow", "1");
    const res = await this.with(async (sock) => check(await send(sock, "GET", `/v1/events?${q}`)));
    yield* lines(res);
  }

  /** The questions waiting ([network] or [mcp] unknown = "ask"): id, kind, name, port, tool, entry, asked, deadline, waiting. */
  async asks(): Promise<JSONObject[]> {
    return (await this.api("GET", "/v1/asks")) as JSONObject[];
  }

  /** The questions as they come: {type: "listening" | "asked" | "answered", question, …}; the sandbox asks while one is open. */
  async *followAsks(): AsyncGenerator<JSONObject> {
    const res = await this.with(async (sock) => check(await send(sock, "GET", "/v1/asks?follow=1")));
    yield* lines(res);
  }

  /** Answers a question; one no longer waiting rejects with APIError 404. */
  async answer(questionId: string, answer: Answer, by = "api"): Promise<JSONObject> {
    return (await this.api("POST", `/v1/asks/${encodeURIComponent(questionId)}`, { answer, by })) as JSONObject;
  }

  /**
   * Answers every question with decide(question) until the handle is
   * closed; resolves once the sandbox listens (it asks, rather than
   * refuses, from then on). A decide that throws denies; its error is kept
   * in the handle's errors.
   */
  async onAsk(decide: Decide, by = "api"): Promise<AskHandler> {
    const res = await this.with(async (sock) => check(await send(sock, "GET", "/v1/asks?follow=1")));
    return new AskHandler(this, res, decide, by);
  }

  /** Reads the sandbox's policy file again; a broken one rejects with PolicyError and keeps the policy in force. */
  async reloadPolicy(): Promise<JSONObject> {
    try {
      return (await this.api("POST", "/v1/policy/reload")) as JSONObject;
    } catch (e) {
      if (e instanceof APIError && e.status === 422) throw new PolicyError(e.detail);
      throw e;
    }
  }

  /** Powers the guest off and waits until it is down; the disk and settings are kept. */
  async stop(): Promise<void> {
    await this.lifecycle(["stop", this.name]);
  }

  /** Deletes the sandbox and its disk (force: even while it runs); its sessions stay in the event store. */
  async rm(opts: { force?: boolean } = {}): Promise<void> {
    await this.lifecycle(["rm", ...(opts.force ? ["--force"] : []), this.name]);
  }

  /** Saves the guest and stops the sandbox; Sandbox.start(name) resumes it. */
  async suspend(): Promise<void> {
    await this.lifecycle(["suspend", this.name]);
  }

  private async lifecycle(args: string[]): Promise<void> {
    try {
      await cli(this.capsem, args, this.data);
    } catch (e) {
      if (e instanceof CLIError && !(await ls({ data: this.data, capsem: this.capsem })).some((s) => s.name === this.name)) {
        throw new SandboxNotFound(`no sandbox ${this.name}: ${e.stderr.trim()}`);
      }
      throw e;
    } finally {
      this.sock = undefined;
    }
  }

  /** Saves the running guest as snapshot tag (default: the time) and lets it go on. */
  async snapshot(tag?: string): Promise<JSONObject> {
    return (await this.api("POST", "/v1/snapshots", tag ? { tag } : {})) as JSONObject;
  }

  /** The sandbox's snapshots, oldest first. */
  async snapshots(): Promise<JSONObject[]> {
    return JSON.parse(await cli(this.capsem, ["snapshots", "--json", this.name], this.data)) as JSONObject[];
  }

  async removeSnapshot(tag: string): Promise<void> {
    await cli(this.capsem, ["snapshot", "rm", this.name, tag], this.data);
  }

  /** Starts sandbox newName from this one's snapshot tag (the newest by default), with its own disk, network and session. */
  async fork(newName: string, opts: ForkOptions = {}): Promise<Sandbox> {
    const [sargs, values] = secretArgs(opts.secrets);
    const args = ["start", "--from", this.name + (opts.tag ? `@${opts.tag}` : ""), ...flags([["--policy", opts.policy],
      ["--workspace", opts.workspace], ["--disk", opts.disk], ["--ca-dir", opts.caDir]], opts.env), ...sargs, newName];
    await cli(this.capsem, args, this.data, values);
    return new Sandbox(newName, { data: this.data, capsem: this.capsem });
  }

  /** The published ports in force. */
  async ports(): Promise<JSONObject[]> {
    return (await this.api("GET", "/v1/ports")) as JSONObject[];
  }

  /** Publishes a guest port on the host: "[HOSTIP:]HOSTPORT:GUESTPORT" (HOSTPORT 0: a free one). */
  async publish(spec: string): Promise<JSONObject> {
    return (await this.api("POST", "/v1/ports", { spec })) as JSONObject;
  }

  async unpublish(spec: string): Promise<void> {
    await this.api("DELETE", `/v1/ports?spec=${encodeURIComponent(spec)}`);
  }
}

/** Sandbox.onAsk's listener: answers each question with decide(question). */
export class AskHandler {
  readonly errors: unknown[] = [];
  readonly done: Promise<void>;

  constructor(sb: Sandbox, private readonly res: Readable, decide: Decide, by: string) {
    this.done = (async () => {
      try {
        for await (const u of lines(res)) {
          if (u.type !== "asked") continue;
          const q = u.question as JSONObject;
          let word: Answer;
          try {
            word = answerWord(await decide(q));
          } catch (e) {
            this.errors.push(e);
            word = "deny";
          }
          try {
            await sb.answer(String(q.id), word, by);
          } catch (e) {
            if (!(e instanceof APIError && e.status === 404)) this.errors.push(e); // 404: answered elsewhere, or timed out
          }
        }
      } catch (e) {
        if (!res.destroyed) this.errors.push(e);
      }
    })();
  }

  /** Stops answering: the sandbox refuses what it would have asked. */
  async close(): Promise<void> {
    this.res.destroy();
    await this.done;
  }
}

function answerWord(a: Answer | boolean | null | undefined): Answer {
  if (a === true) return "once";
  if (a === false || a === null || a === undefined) return "deny";
  return a;
}

function tooLarge(path: string, size: string): string {
  return `${path}: ${size}, more than the ${MAX_BUFFERED >> 20} MiB getFile() returns in memory: pass a sink (getFile(path, sink)) or use getFileStream to stream it`;
}
