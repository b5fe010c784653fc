// The frames of a streamed exec (docs/API.md, sandbox/api/frame.go): an
// 8-byte header — type, three zero bytes, the payload's length as a
// big-endian uint32 — then the payload, at most 1 MiB.

export const STDIN = 0;
export const STDOUT = 1;
export const STDERR = 2;
export const EXIT = 3;
export const STDIN_CLOSE = 4;
export const SIGNAL = 5;
export const RESIZE = 6;

export const HEADER = 8;
export const MAX_PAYLOAD = 1 << 20;

/** The frames carrying payload (split when longer than MAX_PAYLOAD). */
export function encode(type: number, payload: Uint8Array = new Uint8Array(0)): Buffer {
  const parts: Buffer[] = [];
  let off = 0;
  do {
    const n = Math.min(MAX_PAYLOAD, payload.length - off);
    const h = Buffer.alloc(HEADER);
    h[0] = type;
    h.writeUInt32BE(n, 4);
    parts.push(h, Buffer.from(payload.buffer, payload.byteOffset + off, n));
    off += n;
  } while (off < payload.length);
  return Buffer.concat(parts);
}

/** Splits a byte stream into frames as its chunks arrive. */
export class Decoder {
  private buf: Buffer = Buffer.alloc(0);

  /** The whole frames in buf so far, as [type, payload]; a bad header throws. */
  push(chunk: Buffer): Array<[number, Buffer]> {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: Array<[number, Buffer]> = [];
    while (this.buf.length >= HEADER) {
      if (this.buf[1] !== 0 || this.buf[2] !== 0 || this.buf[3] !== 0) {
        throw new Error(`bad frame header ${this.buf.subarray(0, HEADER).toString("hex")}`);
      }
      const n = this.buf.readUInt32BE(4);
      if (n > MAX_PAYLOAD) throw new Error(`frame of ${n} bytes, over 1 MiB`);
      if (this.buf.length < HEADER + n) break;
      out.push([this.buf[0], this.buf.subarray(HEADER, HEADER + n)]);
      this.buf = this.buf.subarray(HEADER + n);
    }
    return out;
  }
}
