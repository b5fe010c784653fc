// HTTP/1.1 over the supervisor's unix socket with node:http, after a check
// that the socket is this user's own.

import * as fs from "node:fs/promises";
import * as http from "node:http";
import * as path from "node:path";
import { Readable } from "node:stream";
import { APIError, ForeignServer } from "./errors.js";

export type Body = Buffer | string | Readable | AsyncIterable<Uint8Array> | undefined;

/**
 * Refuses a socket that another user could be serving. Node has no
 * SO_PEERCRED, so where the Python and Go clients read the serving
 * process's uid from the connection, this checks what capsem makes sure of
 * when it binds (docs/API.md, "The socket"): the socket is ours, and so is
 * its directory, which no other user may write to and which is no
 * symbolic link, so nobody else can have put a socket there. root accepts
 * only root's.
 */
export async function checkSocket(sock: string): Promise<void> {
  const uid = process.geteuid ? process.geteuid() : -1;
  const st = await fs.lstat(sock);
  if (!st.isSocket()) throw new ForeignServer(sock, "not a unix socket");
  if (st.uid !== uid) throw new ForeignServer(sock, `owned by uid ${st.uid}, not by you (uid ${uid})`);
  const dir = path.dirname(sock);
  const d = await fs.lstat(dir);
  if (!d.isDirectory()) throw new ForeignServer(sock, `${dir} is not a directory`);
  if (d.uid !== uid) throw new ForeignServer(sock, `its directory ${dir} is owned by uid ${d.uid}, not by you (uid ${uid})`);
  if (d.mode & 0o022) throw new ForeignServer(sock, `its directory ${dir} is writable by others (mode ${(d.mode & 0o777).toString(8)})`);
}

/** Sends a request and resolves with the answer, its status not yet checked. */
export async function send(sock: string, method: string, url: string, body?: Body,
  headers: Record<string, string> = {}): Promise<http.IncomingMessage> {
  await checkSocket(sock);
  return new Promise((resolve, reject) => {
    const h: Record<string, string> = { Host: "capsem", ...headers };
    if (typeof body === "string" || Buffer.isBuffer(body)) h["Content-Length"] = String(Buffer.byteLength(body));
    else if (body === undefined && (method === "POST" || method === "PUT")) h["Content-Length"] = "0";
    const req = http.request({ socketPath: sock, method, path: url, headers: h, agent: false });
    req.on("response", resolve);
    req.on("error", reject);
    if (body === undefined || typeof body === "string" || Buffer.isBuffer(body)) {
      req.end(body);
    } else {
      const src = body instanceof Readable ? body : Readable.from(body);
      src.on("error", (e) => req.destroy(e));
      src.pipe(req);
    }
  });
}

/** Reads an answer's body, at most limit bytes (more: rejects with the size seen). */
export async function readAll(res: Readable, limit = Infinity): Promise<Buffer> {
  const parts: Buffer[] = [];
  let n = 0;
  for await (const chunk of res) {
    n += (chunk as Buffer).length;
    if (n > limit) {
      res.destroy();
      throw new RangeError(`over ${limit} bytes`);
    }
    parts.push(chunk as Buffer);
  }
  return Buffer.concat(parts);
}

/** The message of an error answer: its JSON "error", else the status and the body's start. */
export function errorMessage(status: number, statusText: string, body: Buffer): string {
  try {
    const e = JSON.parse(body.toString()).error;
    if (typeof e === "string") return e;
  } catch {
    // not JSON: said below
  }
  return `${status} ${statusText}: ${JSON.stringify(body.subarray(0, 200).toString())}`;
}

/** Rejects with APIError for an error answer. */
export async function check(res: http.IncomingMessage): Promise<http.IncomingMessage> {
  const status = res.statusCode ?? 0;
  if (status >= 200 && status < 300) return res;
  const body = await readAll(res, 64 << 10).catch(() => Buffer.alloc(0));
  throw new APIError(status, errorMessage(status, res.statusMessage ?? "", body));
}

/** One request whose answer is JSON (or empty: undefined). */
export async function json(sock: string, method: string, url: string, obj?: unknown): Promise<unknown> {
  const body = obj === undefined ? undefined : JSON.stringify(obj);
  const res = await check(await send(sock, method, url, body, body ? { "Content-Type": "application/json" } : {}));
  const data = await readAll(res);
  return data.length ? JSON.parse(data.toString()) : undefined;
}

/** The NDJSON lines of an answer, parsed, as they come. */
export async function* lines(res: Readable): AsyncGenerator<Record<string, unknown>> {
  let buf = "";
  try {
    for await (const chunk of res) {
      buf += (chunk as Buffer).toString();
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (line) yield JSON.parse(line) as Record<string, unknown>;
      }
    }
    if (buf.trim()) yield JSON.parse(buf) as Record<string, unknown>;
  } finally {
    res.destroy();
  }
}
