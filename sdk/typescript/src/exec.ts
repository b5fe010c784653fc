// A command running through POST /v1/exec upgraded to capsem-exec.

import * as http from "node:http";
import type { Socket } from "node:net";
import * as frames from "./frames.js";
import { APIError } from "./errors.js";
import { checkSocket, errorMessage, readAll } from "./http.js";

export const EXEC_PROTOCOL = "capsem-exec";

/** How a command ended: the exit frame's JSON. */
export interface Exit {
  exit_code: number;
  signal?: string;
  timed_out?: boolean;
  error?: string;
}

/** A chunk of a command's output, as it wrote it. */
export interface Chunk {
  stream: "stdout" | "stderr";
  data: Buffer;
}

/**
 * A running command: iterate it (for await) for its output as it comes,
 * then read exit (or await wait()). Send stdin, signals and window sizes;
 * close() hangs up on a command still running.
 */
export class ExecStream implements AsyncIterable<Chunk> {
  exit: Exit | undefined;
  private queue: Chunk[] = [];
  private wake: (() => void) | undefined;
  private ended = false;
  private failure: Error | undefined;

  private constructor(private readonly sock: Socket, head: Buffer) {
    const dec = new frames.Decoder();
    const onData = (b: Buffer) => {
      try {
        for (const [type, payload] of dec.push(b)) {
          if (type === frames.STDOUT) this.queue.push({ stream: "stdout", data: Buffer.from(payload) });
          else if (type === frames.STDERR) this.queue.push({ stream: "stderr", data: Buffer.from(payload) });
          else if (type === frames.EXIT) this.exit = JSON.parse(payload.toString()) as Exit;
        }
      } catch (e) {
        this.failure = e as Error;
        sock.destroy();
      }
      this.notify();
    };
    // What came with the 101 first, then the rest as it comes.
    if (head.length) onData(head);
    sock.on("data", onData);
    const end = () => {
      this.ended = true;
      this.notify();
    };
    sock.on("end", end);
    sock.on("close", end);
    sock.on("error", (e) => {
      // A write after the command ended (EPIPE) is nobody's error; the
      // exit frame, when it came, has been read already.
      if (!this.exit) this.failure = e;
      end();
    });
  }

  /** Starts req on the socket at sockPath; with closeStdin the command gets no stdin. */
  static open(sockPath: string, req: object, closeStdin: boolean): Promise<ExecStream> {
    return checkSocket(sockPath).then(() => new Promise((resolve, reject) => {
      const body = JSON.stringify(req);
      const r = http.request({
        socketPath: sockPath, method: "POST", path: "/v1/exec", agent: false,
        headers: {
          Host: "capsem", "Content-Type": "application/json", "Content-Length": String(Buffer.byteLength(body)),
          Connection: "Upgrade", Upgrade: EXEC_PROTOCOL,
        },
      });
      r.on("upgrade", (_res: http.IncomingMessage, sock: Socket, head: Buffer) => {
        const s = new ExecStream(sock, head);
        if (closeStdin) s.send(frames.STDIN_CLOSE);
        resolve(s);
      });
      r.on("response", (res: http.IncomingMessage) => {
        readAll(res, 64 << 10).catch(() => Buffer.alloc(0)).then((b) => {
          reject(new APIError(res.statusCode ?? 0, errorMessage(res.statusCode ?? 0, res.statusMessage ?? "", b)));
        });
      });
      r.on("error", reject);
      r.end(body);
    }));
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Chunk> {
    for (;;) {
      const c = this.queue.shift();
      if (c) {
        yield c;
        continue;
      }
      if (this.exit || this.ended) break;
      await new Promise<void>((r) => (this.wake = r));
    }
    if (!this.exit) this.exit = { exit_code: -1, error: this.failure?.message ?? "the exec's connection ended before its exit" };
    this.sock.destroy();
  }

  private send(type: number, payload?: Uint8Array): void {
    if (!this.sock.destroyed && this.sock.writable) this.sock.write(frames.encode(type, payload));
  }

  sendStdin(data: Uint8Array | string): void {
    this.send(frames.STDIN, typeof data === "string" ? Buffer.from(data) : data);
  }

  closeStdin(): void {
    this.send(frames.STDIN_CLOSE);
  }

  /** A signal by name without SIG: "INT", "TERM", "KILL", … */
  signal(sig: string): void {
    this.send(frames.SIGNAL, Buffer.from(sig));
  }

  resize(rows: number, cols: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt16BE(rows, 0);
    b.writeUInt16BE(cols, 2);
    this.send(frames.RESIZE, b);
  }

  /** Drains the output and resolves with the exit code. */
  async wait(): Promise<number> {
    for await (const _ of this) {
      // drained
    }
    return this.exit?.exit_code ?? -1;
  }

  close(): void {
    this.sock.destroy();
  }
}
