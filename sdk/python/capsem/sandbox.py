"""Sandbox: one long-lived capsem sandbox, driven through its supervisor's
API (docs/API.md) for commands and files, and through the capsem CLI for
what needs a process of its own (start, stop, rm)."""

import contextlib
import http.client
import json
import os
import shutil
import subprocess
import threading
import urllib.parse
from typing import Iterator, NamedTuple, Optional

from . import _frames, home
from ._http import UnixHTTPConnection, connect, raise_for, request
from .errors import (
    AlreadyRunning,
    APIError,
    CapsemError,
    CLIError,
    PolicyError,
    SandboxNotFound,
    SandboxNotRunning,
    TooLarge,
)

EXEC_PROTOCOL = "capsem-exec"
EXIT_TIMEOUT = 124

# MAX_BUFFERED is what exec() keeps of each of stdout and stderr (the rest
# is read and dropped, and Result.truncated says so) and the most get_file()
# returns in memory: the Go API's buffered exec cut, maxBufferedOutput in
# sandbox/api/exec.go, whose value this must stay (a test there checks).
# exec_stream() and get_file() with a file object stream, unbounded.
MAX_BUFFERED = 16 << 20


class Result(NamedTuple):
    """A finished command: its exit code (124 after a timeout, 127 when not
    found), its output, and why it ended when not by itself."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    signal: Optional[str] = None  # the signal that killed it ("KILL"), if one did
    error: Optional[str] = None  # why it did not run or did not end normally
    truncated: bool = False  # stdout or stderr was over MAX_BUFFERED (16 MiB) and is cut there


def _capsem_bin(explicit=None):
    b = explicit or os.environ.get("CAPSEM_BIN") or shutil.which("capsem")
    if not b:
        raise CapsemError("the capsem binary is not found: pass capsem=PATH, set CAPSEM_BIN, or put capsem on PATH")
    return b


def _data_dir(explicit=None):
    return explicit or os.environ.get("CAPSEM_DATA") or None


def _cli(capsem, args, data=None):
    """Runs `capsem SUB [--data D] ARGS…` (args[0] is the subcommand) and
    returns its stdout, raising CLIError when it fails."""
    full = [args[0]] + (["--data", data] if data else []) + list(args[1:])
    p = subprocess.run([capsem] + full, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if p.returncode != 0:
        raise CLIError(p.returncode, p.stderr, full)
    return p.stdout


def ls(data=None, capsem=None):
    """Every sandbox, as `capsem ls --json` gives it: dicts with name, state
    (running, stopped, suspended, crashed), created, started, policy, workspace, cpus,
    memory_mib, disk_used, disk_size, session_id, socket, …"""
    return json.loads(_cli(_capsem_bin(capsem), ["ls", "--json"], _data_dir(data)))


class Sandbox:
    """A sandbox by name. ``Sandbox.start(name, …)`` creates or starts one;
    ``Sandbox(name)`` attaches to one that runs."""

    def __init__(self, name, data=None, capsem=None):
        self.name = name
        self.data = _data_dir(data)
        self.capsem = _capsem_bin(capsem)
        self._sock = None

    @classmethod
    def start(cls, name, policy=None, workspace=None, env=None, cpus=None, memory=None, disk=None,
              data=None, ca_dir=None, capsem=None, publish=None):
        """Creates sandbox name the first time, or starts it again with what
        it kept; returns once its guest answers. Arguments given to a
        restart replace the stored ones. env is a dict (or K=V strings) for
        every command in the sandbox: nothing of this process's environment
        enters the guest otherwise. publish is a list of port specs,
        "[HOSTIP:]HOSTPORT:GUESTPORT" (127.0.0.1 unless HOSTIP is given,
        HOSTPORT 0 for a free one), kept for later starts."""
        sb = cls(name, data=data, capsem=capsem)
        args = ["start"]
        for flag, value in (("--policy", policy), ("--workspace", workspace), ("--cpus", cpus),
                            ("--memory", memory), ("--disk", disk), ("--ca-dir", ca_dir)):
            if value is not None:
                args += [flag, str(value)]
        for kv in _env_list(env):
            args += ["--env", kv]
        for spec in publish or ():
            args += ["--publish", spec]
        try:
            _cli(sb.capsem, args + [name], sb.data)
        except CLIError as e:
            if e.code == 1 and "already running" in e.stderr:
                raise AlreadyRunning(e.stderr.strip()) from None
            raise
        return sb

    # The socket: where sandbox/home's rule puts it (home.py), while its
    # supervisor holds the lock; else capsem ls says why there is none.
    def _socket(self):
        if self._sock and os.path.exists(self._sock):
            return self._sock
        data = self.data or home.default_data_dir()
        if home.NAME_RULE.match(self.name) and home.locked(data, self.name):
            sock = home.socket_path(data, self.name)
            if os.path.exists(sock):
                self._sock = sock
                return sock
        for s in ls(self.data, self.capsem):
            if s["name"] == self.name:
                if s["state"] != "running":
                    raise SandboxNotRunning(f"sandbox {self.name} is {s['state']}: Sandbox.start({self.name!r}) starts it")
                self._sock = s["socket"]
                return self._sock
        raise SandboxNotFound(f"no sandbox {self.name}: Sandbox.start({self.name!r}) creates it")

    def _api(self, method, path, body=None, headers=None):
        with self._gone():
            return request(self._socket(), method, path, body=body, headers=headers)

    @contextlib.contextmanager
    def _gone(self):
        """Turns a socket that is no longer there (the sandbox stopped since
        it was looked up) into SandboxNotRunning or SandboxNotFound."""
        try:
            yield
        except (FileNotFoundError, ConnectionRefusedError):
            self._sock = None
            self._socket()  # raises the typed error when it is not running
            raise

    def status(self):
        """GET /v1/sandbox."""
        return self._api("GET", "/v1/sandbox")

    def exec(self, cmd, env=None, timeout=None, workdir=None, stdin=None) -> Result:
        """Runs cmd (a list of words, or a str run with sh -c) and waits for
        it: its exit code and its stdout and stderr, apart, each cut at
        MAX_BUFFERED (16 MiB; truncated says so — exec_stream streams any
        amount). timeout is in seconds: the command is killed after it
        (exit 124, timed_out)."""
        stream = self.exec_stream(cmd, env=env, timeout=timeout, workdir=workdir)
        feeder = None
        if stdin is not None:
            data = stdin if isinstance(stdin, bytes) else stdin.encode()

            def feed():
                try:
                    stream.send_stdin(data)
                    stream.close_stdin()
                except OSError:
                    pass  # the command ended without reading it all

            feeder = threading.Thread(target=feed, daemon=True)
            feeder.start()
        else:
            stream.close_stdin()
        out, err = bytearray(), bytearray()
        cut = False
        with stream:
            for name, chunk in stream:
                buf = out if name == "stdout" else err
                room = MAX_BUFFERED - len(buf)
                if len(chunk) > room:
                    cut, chunk = True, chunk[:room]
                buf.extend(chunk)
        if feeder:
            feeder.join(timeout=5)
        x = stream.exit
        return Result(x.get("exit_code", -1), bytes(out), bytes(err), bool(x.get("timed_out")),
                      x.get("signal"), x.get("error"), cut)

    def exec_stream(self, cmd, env=None, timeout=None, workdir=None, tty=False, rows=None, cols=None):
        """Starts cmd and returns an ExecStream: iterate it for
        ("stdout"|"stderr", bytes) chunks as the command writes them; send
        stdin, signals and window sizes; its exit once the iteration ends."""
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        req = {"argv": argv, "env": _env_list(env)}
        if workdir:
            req["workdir"] = workdir
        if timeout is not None:
            req["timeout_ms"] = max(1, int(timeout * 1000))
        if tty:
            req.update(tty=True, rows=rows or 24, cols=cols or 80)
        with self._gone():
            return ExecStream(self._socket(), req)

    def put_file(self, path, data, mode=None):
        """Writes data (bytes, or a binary file object, streamed) to path in
        the guest (absolute, or relative to /workspace), its directory made
        first; mode is an octal string ("0755")."""
        q = {"path": path}
        if mode is not None:
            q["mode"] = mode if isinstance(mode, str) else oct(mode)[2:]
        url = "/v1/files?" + urllib.parse.urlencode(q)
        conn = UnixHTTPConnection(self._socket())
        try:
            with self._gone():
                conn.connect()
            if isinstance(data, (bytes, bytearray, memoryview)):
                conn.request("PUT", url, body=bytes(data))
            else:
                size = _file_size(data)
                if size is None:
                    conn.request("PUT", url, body=_chunks(data), encode_chunked=True,
                                 headers={"Transfer-Encoding": "chunked"})
                else:
                    conn.request("PUT", url, body=data, headers={"Content-Length": str(size)})
            resp = conn.getresponse()
            raise_for(resp)
            return json.loads(resp.read())
        finally:
            conn.close()

    def get_file(self, path, fileobj=None):
        """The guest's file at path: its bytes, or, with fileobj, written
        there (streamed, any size) and its size returned. Without fileobj a
        file over MAX_BUFFERED (16 MiB) raises TooLarge, having read no
        more than that."""
        conn = UnixHTTPConnection(self._socket())
        try:
            with self._gone():
                conn.connect()
            conn.request("GET", "/v1/files?" + urllib.parse.urlencode({"path": path}))
            resp = conn.getresponse()
            raise_for(resp)
            want = resp.getheader("Content-Length")
            try:
                if fileobj is None:
                    if want is not None and int(want) > MAX_BUFFERED:
                        raise TooLarge(_too_large(path, f"{want} bytes"))
                    body = resp.read(MAX_BUFFERED + 1)
                    if len(body) > MAX_BUFFERED:
                        raise TooLarge(_too_large(path, "over that"))
                    n = len(body)
                else:
                    body, n = None, 0
                    while True:
                        chunk = resp.read1(256 << 10)
                        if not chunk:
                            break
                        fileobj.write(chunk)
                        n += len(chunk)
            except http.client.IncompleteRead as e:
                raise CapsemError(f"{path}: the guest's file ended short ({e})") from None
            if want is not None and n != int(want):
                raise CapsemError(f"{path}: got {n} of {want} bytes")
            return body if fileobj is None else n
        finally:
            conn.close()

    def events(self, since=0, follow=False) -> Iterator[dict]:
        """The session's events after sequence number since, one dict per
        row of the SQLite export ({"table": "exec_events", …}); with follow
        it goes on until the sandbox stops."""
        q = {"since": str(since)}
        if follow:
            q["follow"] = "1"
        return self._lines("/v1/events?" + urllib.parse.urlencode(q))

    def _lines(self, url):
        """GETs url and yields each line of the NDJSON answer, decoded."""
        conn = UnixHTTPConnection(self._socket())
        try:
            with self._gone():
                conn.connect()
            conn.request("GET", url)
            resp = conn.getresponse()
            raise_for(resp)
            while True:
                line = resp.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()

    def asks(self, follow=False):
        """What the sandbox's policy did not foresee ([network] unknown =
        "ask", [mcp] unknown = "ask"). Without follow: the questions
        waiting, a list of dicts (id, kind "network" or "mcp", name, port,
        tool, entry — what an answer of "session" or "always" adds —, asked,
        deadline, waiting). With follow: an iterator of updates, {"type":
        "asked" | "answered", "question": {…}, "reason": …}, the waiting
        questions first; while one is open the sandbox asks rather than
        refuses at once."""
        if not follow:
            return self._api("GET", "/v1/asks")
        return self._lines("/v1/asks?follow=1")

    def answer(self, question_id, answer, by="api"):
        """Answers a question: answer is "once", "session", "always" (kept
        in the sandbox's overlay, policy-asked.toml, for every later start)
        or "deny". A question no longer waiting raises APIError 404."""
        body = json.dumps({"answer": answer, "by": by}).encode()
        return self._api("POST", "/v1/asks/" + urllib.parse.quote(question_id, safe=""), body=body,
                         headers={"Content-Type": "application/json"})

    def on_ask(self, decide, by="api"):
        """Answers every question with decide(question) in a thread until
        the returned handle is closed (it is a context manager). decide
        returns "once", "session", "always" or "deny" (True is "once",
        False or None "deny"); an exception in it denies. The handle
        listens from the moment on_ask returns: the sandbox asks, rather
        than refuses, from then on."""
        return _AskHandler(self, decide, by)

    def reload_policy(self):
        """Reads the sandbox's policy file again; a broken file raises
        PolicyError (file:line) and keeps the policy in force."""
        try:
            return self._api("POST", "/v1/policy/reload")
        except APIError as e:
            if e.status == 422:
                raise PolicyError(e.message) from None
            raise

    def stop(self):
        """Powers the guest off (sync, unmount) and waits until it is down;
        the disk and settings are kept. A sandbox that is not running is
        left as it is (a crashed one is marked stopped), as with capsem
        stop; SandboxNotFound when there is no such sandbox."""
        try:
            _cli(self.capsem, ["stop", self.name], self.data)
        except CLIError as e:
            self._typed(e)
            raise
        finally:
            self._sock = None

    def rm(self, force=False):
        """Deletes the sandbox and its disk (force: even while it runs). Its
        sessions stay in the event store."""
        try:
            _cli(self.capsem, ["rm"] + (["--force"] if force else []) + [self.name], self.data)
        except CLIError as e:
            self._typed(e)
            raise
        finally:
            self._sock = None

    def snapshot(self, tag=None):
        """Saves the running guest — memory, processes, devices and disk at one
        instant — as snapshot tag (default: the time) and lets it go on;
        returns its record (dict: tag, created, bytes, paused_ms,
        session_id, …). A guest process holding /workspace makes it fail
        with APIError 409, naming the process."""
        body = json.dumps({"tag": tag} if tag else {})
        return self._api("POST", "/v1/snapshots", body=body, headers={"Content-Type": "application/json"})

    def snapshots(self):
        """The sandbox's snapshots, oldest first (running or not), as
        `capsem snapshots --json` gives them."""
        return json.loads(_cli(self.capsem, ["snapshots", "--json", self.name], self.data))

    def remove_snapshot(self, tag):
        """Removes snapshot tag."""
        _cli(self.capsem, ["snapshot", "rm", self.name, tag], self.data)

    def fork(self, new_name, tag=None, policy=None, workspace=None, env=None, secrets=None, disk=None, ca_dir=None):
        """Starts sandbox new_name from this sandbox's snapshot tag (the
        newest when None): the same processes, files and memory, its own
        disk, network and session, fresh randomness, the clock set to now.
        It keeps this sandbox's settings but for the arguments given;
        secrets are --secret flags ("NAME@HOST,…"), their real values from
        this process's environment (default: as this sandbox was started).
        Returns the new Sandbox."""
        args = ["start", "--from", self.name + ("@" + tag if tag else "")]
        for flag, value in (("--policy", policy), ("--workspace", workspace), ("--disk", disk), ("--ca-dir", ca_dir)):
            if value is not None:
                args += [flag, str(value)]
        for kv in _env_list(env):
            args += ["--env", kv]
        for sec in secrets or ():
            args += ["--secret", sec]
        _cli(self.capsem, args + [new_name], self.data)
        return Sandbox(new_name, data=self.data, capsem=self.capsem)

    def ports(self):
        """The published ports in force (dicts: spec, host_ip, host_port,
        guest_port, protocol, published), as GET /v1/ports gives them."""
        return self._api("GET", "/v1/ports")

    def publish(self, spec):
        """Publishes a guest port on the host: spec is
        "[HOSTIP:]HOSTPORT:GUESTPORT" (127.0.0.1 unless HOSTIP is given,
        HOSTPORT 0 for a free one). Returns the port in force (its
        host_port is the one taken); kept in the settings for later
        starts. A host port in use is APIError 409."""
        body = json.dumps({"spec": spec})
        return self._api("POST", "/v1/ports", body=body, headers={"Content-Type": "application/json"})

    def unpublish(self, spec):
        """Unpublishes the port spec names (its host address and port, or the
        spec as published) and drops it from the settings."""
        self._api("DELETE", "/v1/ports?spec=" + urllib.parse.quote(spec, safe=""))

    def suspend(self):
        """Saves the guest and stops the sandbox (state suspended);
        Sandbox.start(name) resumes it with its processes."""
        try:
            _cli(self.capsem, ["suspend", self.name], self.data)
        finally:
            self._sock = None

    def _typed(self, e):
        """Raises the typed error a CLIError stands for, if there is one:
        the state comes from capsem ls, not from parsing messages."""
        state = next((s["state"] for s in ls(self.data, self.capsem) if s["name"] == self.name), None)
        if state is None:
            raise SandboxNotFound(f"no sandbox {self.name}: {e.stderr.strip()}") from None


    def __repr__(self):
        return f"Sandbox({self.name!r})"


class ExecStream:
    """A command running through POST /v1/exec upgraded to capsem-exec:
    iterate for its output, then read .exit (a dict: exit_code, signal,
    timed_out, error). Usable as a context manager, which closes the
    connection (a command still running is then hung up on)."""

    def __init__(self, sock_path, req):
        body = json.dumps(req).encode()
        s = connect(sock_path)
        s.sendall(
            b"POST /v1/exec HTTP/1.1\r\nHost: capsem\r\nContent-Type: application/json\r\n"
            b"Connection: Upgrade\r\nUpgrade: " + EXEC_PROTOCOL.encode() + b"\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        self._sock = s
        self._r = s.makefile("rb")
        self._wlock = threading.Lock()
        self.exit = None
        status = self._r.readline().decode("latin-1")
        headers = {}
        while True:
            line = self._r.readline().decode("latin-1").strip()
            if not line:
                break
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        parts = status.split(" ", 2)
        code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        if code != 101:
            n = int(headers.get("content-length", "0") or 0)
            raw = self._r.read(n) if n else b""
            self.close()
            try:
                msg = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                msg = f"{status.strip()}: {raw[:200]!r}"
            raise APIError(code, msg)

    def __iter__(self):
        while self.exit is None:
            try:
                typ, payload = _frames.read(self._r)
            except (EOFError, OSError) as e:
                self.exit = {"exit_code": -1, "error": str(e)}
                return
            if typ == _frames.STDOUT:
                yield "stdout", payload
            elif typ == _frames.STDERR:
                yield "stderr", payload
            elif typ == _frames.EXIT:
                self.exit = json.loads(payload)

    def _send(self, typ, payload=b""):
        # A command that has ended (or never started) has its exit on the
        # way and the server has closed its side: what is sent then has no
        # one to go to, which is not an error of the caller's.
        with self._wlock:
            try:
                self._sock.sendall(_frames.encode(typ, payload))
            except (BrokenPipeError, ConnectionResetError):
                pass

    def send_stdin(self, data):
        self._send(_frames.STDIN, data)

    def close_stdin(self):
        self._send(_frames.STDIN_CLOSE)

    def signal(self, sig):
        """A signal by name without SIG: "INT", "TERM", "KILL", …"""
        self._send(_frames.SIGNAL, sig.encode())

    def resize(self, rows, cols):
        self._send(_frames.RESIZE, rows.to_bytes(2, "big") + cols.to_bytes(2, "big"))

    def wait(self):
        """Drains the output and returns the exit code."""
        for _ in self:
            pass
        return self.exit.get("exit_code", -1)

    def close(self):
        try:
            self._r.close()
        finally:
            self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _env_list(env):
    if env is None:
        return []
    if isinstance(env, dict):
        return [f"{k}={v}" for k, v in env.items()]
    return list(env)


def _too_large(path, size):
    return (f"{path}: {size}, more than the {MAX_BUFFERED >> 20} MiB get_file() returns in memory: "
            "pass a file object (get_file(path, fileobj)) to stream it")


def _file_size(f):
    try:
        st = os.fstat(f.fileno())
        return st.st_size - f.tell()
    except (AttributeError, OSError, ValueError):
        return None


def _chunks(f, size=256 << 10):
    while True:
        b = f.read(size)
        if not b:
            return
        yield b


__all__ = ["Sandbox", "Result", "ExecStream", "ls", "EXIT_TIMEOUT", "MAX_BUFFERED"]


class _AskHandler:
    """Sandbox.on_ask's thread: follows the sandbox's questions and answers
    each with decide(question)."""

    def __init__(self, sb, decide, by):
        self._sb, self._decide, self._by = sb, decide, by
        self.errors = []  # what went wrong answering, as exceptions
        self._conn = UnixHTTPConnection(sb._socket())
        with sb._gone():
            self._conn.connect()
        self._conn.request("GET", "/v1/asks?follow=1")
        self._resp = self._conn.getresponse()  # the listener is registered once the answer starts
        raise_for(self._resp)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"capsem-ask-{sb.name}", daemon=True)
        self._thread.start()

    def _run(self):
        try:
            while True:
                line = self._resp.readline()
                if not line:
                    return
                if not line.strip():
                    continue
                u = json.loads(line)
                if u.get("type") != "asked":
                    continue
                q = u["question"]
                try:
                    a = self._decide(q)
                except Exception as e:  # a callback that fails denies
                    self.errors.append(e)
                    a = "deny"
                if a is True:
                    a = "once"
                elif a is False or a is None:
                    a = "deny"
                try:
                    self._sb.answer(q["id"], a, by=self._by)
                except APIError as e:
                    if e.status != 404:  # 404: answered elsewhere, or timed out
                        self.errors.append(e)
        except (OSError, ValueError, http.client.HTTPException) as e:
            if not self._closed:
                self.errors.append(e)

    def close(self):
        """Stops answering: the sandbox refuses what it would have asked."""
        self._closed = True
        try:
            self._conn.sock and self._conn.sock.shutdown(2)  # the thread's read ends
        except OSError:
            pass
        self._thread.join(timeout=10)
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
