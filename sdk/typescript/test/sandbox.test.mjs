// The TypeScript client against real sandboxes, imported as a user gets it:
// from the packed tarball installed beside this file (go test ./tests -run
// TestTypeScriptSDK packs, installs and runs it). CAPSEM_BIN is the capsem
// to drive, CAPSEM_TEST_ROOT a directory for the data, the CA and the
// workspace.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Readable, Writable } from "node:stream";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { createRequire } from "node:module";
import {
  Sandbox, ls, APIError, AlreadyRunning, ForeignServer, PolicyError, SandboxNotFound, SandboxNotRunning, TooLarge,
  EXIT_TIMEOUT, MAX_BUFFERED, VERSION,
} from "capsem";

const root = process.env.CAPSEM_TEST_ROOT;
const capsem = process.env.CAPSEM_BIN;
if (!root || !capsem) throw new Error("set CAPSEM_BIN and CAPSEM_TEST_ROOT (go test ./tests -run TestTypeScriptSDK does)");
const where = { data: path.join(root, "data"), capsem };
const base = { ...where, caDir: path.join(root, "ca"), workspace: path.join(root, "ws") };
fs.mkdirSync(base.workspace, { recursive: true });

describe("a shared sandbox", () => {
  let sb;
  before(async () => {
    sb = await Sandbox.start("ts-shared", { ...base, env: { FROM_START: "yes" } });
  });
  after(async () => {
    await sb.rm({ force: true });
  });

  test("exec: codes, streams apart, stdin, env, timeout, not found", async () => {
    let r = await sb.exec(["sh", "-c", "echo out; echo err >&2; exit 42"]);
    assert.deepEqual([r.exitCode, r.stdout.toString(), r.stderr.toString()], [42, "out\n", "err\n"]);
    assert.equal((await sb.exec("echo $((6*7))")).stdout.toString(), "42\n");
    assert.equal((await sb.exec(["cat"], { stdin: "to the guest" })).stdout.toString(), "to the guest");
    const env = (await sb.exec(["env"], { env: { FROM_EXEC: "1" } })).stdout.toString();
    assert.match(env, /FROM_EXEC=1/);
    assert.match(env, /FROM_START=yes/);
    assert.doesNotMatch(env, /CAPSEM_BIN/, "the host's environment leaked into the guest");
    r = await sb.exec(["sleep", "60"], { timeout: 1 });
    assert.equal(r.exitCode, EXIT_TIMEOUT);
    assert.ok(r.timedOut);
    r = await sb.exec(["no-such-command"]);
    assert.equal(r.exitCode, 127);
    assert.match(r.error, /no-such-command/);
    const [a, b] = await Promise.all([sb.exec("sleep 1; echo a"), sb.exec("sleep 1; echo b")]);
    assert.deepEqual([a.stdout.toString(), b.stdout.toString()], ["a\n", "b\n"]);
  });

  test("exec keeps 16 MiB of each stream", async () => {
    const r = await sb.exec(`head -c ${MAX_BUFFERED + 5} /dev/zero; echo done >&2`);
    assert.deepEqual([r.exitCode, r.stdout.length, r.stderr.toString(), r.truncated], [0, MAX_BUFFERED, "done\n", true]);
  });

  test("execStream: output as it comes, stdin, signals", async () => {
    const s = await sb.execStream(["sh", "-c", "read x; echo got $x; echo e >&2"]);
    s.sendStdin("line\n");
    s.closeStdin();
    const chunks = [];
    for await (const c of s) chunks.push([c.stream, c.data.toString()]);
    const why = JSON.stringify({ chunks, exit: s.exit });
    assert.equal(chunks.filter(([st]) => st === "stdout").map(([, d]) => d).join(""), "got line\n", why);
    assert.deepEqual(chunks.filter(([st]) => st === "stderr").map(([, d]) => d).join(""), "e\n");
    assert.equal(s.exit.exit_code, 0);

    const p = await sb.execStream(["python3", "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_DFL); " +
      "print('ready', flush=True); time.sleep(600)"]);
    const it = p[Symbol.asyncIterator]();
    assert.equal((await it.next()).value.data.toString(), "ready\n");
    p.signal("INT");
    assert.equal(await p.wait(), 130);
  });

  test("files: bytes, streams, sinks, modes, errors", async () => {
    const data = randomBytes((5 << 20) + 7);
    assert.equal((await sb.putFile("/root/ts/a.bin", data)).size, data.length);
    assert.ok((await sb.getFile("/root/ts/a.bin")).equals(data));
    async function* parts() {
      for (let i = 0; i < data.length; i += 1 << 20) yield data.subarray(i, i + (1 << 20));
    }
    assert.equal((await sb.putFile("/root/ts/b.bin", Readable.from(parts()), { mode: 0o600 })).size, data.length);
    const got = [];
    const sink = new Writable({ write(chunk, _enc, cb) { got.push(chunk); cb(); } });
    assert.equal(await sb.getFile("/root/ts/b.bin", sink), data.length);
    assert.ok(Buffer.concat(got).equals(data));
    assert.equal((await sb.exec(["stat", "-c", "%a", "/root/ts/b.bin"])).stdout.toString(), "600\n");
    const streamed = [];
    for await (const c of await sb.getFileStream("/root/ts/a.bin")) streamed.push(c);
    assert.ok(Buffer.concat(streamed).equals(data));
    await assert.rejects(sb.getFile("/root/ts/none"), (e) => e instanceof APIError && e.status === 404);
    await sb.exec(`head -c ${MAX_BUFFERED + 1} /dev/zero > /root/ts/big`);
    await assert.rejects(sb.getFile("/root/ts/big"), TooLarge);
  });

  test("events, asks, policy reload, ports, status, ls", async () => {
    await sb.exec(["echo", "ts-event-marker"]);
    const rows = [];
    for await (const ev of sb.events({ since: 0 })) rows.push(ev);
    assert.ok(rows.some((ev) => ev.table === "exec_events" && String(ev.argv).includes("ts-event-marker")));
    assert.deepEqual(await sb.asks(), []);
    assert.ok("sha256" in (await sb.reloadPolicy()));
    const p = await sb.publish("0:8000");
    assert.ok(p.host_port > 0);
    assert.equal((await sb.ports()).length, 1);
    await sb.unpublish(p.spec);
    assert.deepEqual(await sb.ports(), []);
    assert.equal((await sb.status()).name, "ts-shared");
    assert.ok((await ls(where)).some((s) => s.name === "ts-shared" && s.state === "running"));
  });
});

test("a sandbox's life: secrets as placeholders, a question answered, stop, typed errors", async () => {
  const real = "sk-ant-api03-" + "ts00".repeat(12);
  delete process.env.ANTHROPIC_API_KEY;
  const pol = path.join(root, "ask.toml");
  fs.writeFileSync(pol, '[network]\nallow = []\nunknown = "ask"\nask_timeout = 30\n');
  const sb = await Sandbox.start("ts-life", { ...base, policy: pol, secrets: { ANTHROPIC_API_KEY: real } });
  try {
    const env = (await sb.exec(["sh", "-c", "cat /proc/[0-9]*/environ | tr '\\0' '\\n'"])).stdout.toString();
    assert.ok(!env.includes(real), "the real key is in the guest");
    assert.match(env, /ANTHROPIC_API_KEY=capsem-secret-/);

    const seen = [];
    const h = await sb.onAsk(async (q) => {
      seen.push(q.name);
      return q.name === "yes.example" ? "once" : "deny";
    });
    assert.equal((await sb.exec(["getent", "hosts", "yes.example"])).exitCode, 0);
    assert.notEqual((await sb.exec(["getent", "hosts", "no.example"])).exitCode, 0);
    await h.close();
    assert.deepEqual(h.errors, []);
    assert.deepEqual(seen, ["yes.example", "no.example"]);

    fs.writeFileSync(pol, "[network\n");
    await assert.rejects(sb.reloadPolicy(), PolicyError);
    await assert.rejects(Sandbox.start("ts-life", where), AlreadyRunning);
    await sb.stop();
    await assert.rejects(sb.exec(["true"]), SandboxNotRunning);
  } finally {
    await sb.rm({ force: true });
  }
  await assert.rejects(sb.exec(["true"]), SandboxNotFound);
  await assert.rejects(sb.rm(), SandboxNotFound);
});

test("a socket in a directory others can write to is refused before a byte is sent", async () => {
  const dir = fs.mkdtempSync(path.join(root, "foreign-"));
  fs.chmodSync(dir, 0o777);
  const sock = path.join(dir, "api.sock");
  let got = 0;
  const srv = net.createServer((c) => c.on("data", (b) => (got += b.length)));
  await new Promise((r) => srv.listen(sock, r));
  // A capsem whose ls names that socket, as a rival's socket in a shared directory would be.
  const fake = path.join(root, "fake-capsem");
  fs.writeFileSync(fake, `#!/bin/sh\necho '[{"name": "x", "state": "running", "socket": "${sock}"}]'\n`, { mode: 0o755 });
  try {
    await assert.rejects(new Sandbox("x", { capsem: fake }).status(), ForeignServer);
    assert.equal(got, 0);
  } finally {
    srv.close();
  }
});

test("the version is the package's", () => {
  const pkg = createRequire(import.meta.url)("capsem/package.json");
  assert.equal(VERSION, pkg.version);
});
