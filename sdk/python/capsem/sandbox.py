"""Sandbox: one long-lived capsem sandbox, driven through its supervisor's
API (docs/API.md) for commands and files, and through the capsem CLI for
what needs a process of its own (start, stop, rm). The asyncio twin is
capsem.aio."""

import contextlib
import http.client
import json
import os
import socket
import subprocess
import threading
from typing import (Any, BinaryIO, Callable, Dict, Iterator, List, Literal, Mapping, Optional, Sequence, Union,
                    overload)

from . import _frames, _protocol as p, home
from ._http import UnixHTTPConnection, connect, raise_for, request
from ._protocol import EXIT_TIMEOUT, JSON, MAX_BUFFERED, Env, Result, Secrets
from .errors import APIError, CapsemError, CLIError, PolicyError, SandboxNotFound, SandboxNotRunning, TooLarge

Decide = Callable[[JSON], Any]


def _cli(capsem: str, args: Sequence[str], data: Optional[str] = None,
         env: Optional[Dict[str, str]] = None) -> str:
    """Runs `capsem SUB [--data D] ARGS…` (args[0] is the subcommand) and
    returns its stdout, raising CLIError when it fails."""
    full = p.cli_args(args, data)
    r = subprocess.run([capsem] + full, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise CLIError(r.returncode, r.stderr, full)
    return r.stdout


def ls(data: Optional[str] = None, capsem: Optional[str] = None) -> List[JSON]:
    """Every sandbox, as `capsem ls --json` gives it: dicts with name, state
    (running, stopped, suspended, crashed), created, started, policy, workspace, cpus,
    memory_mib, disk_used, disk_size, session_id, socket, …"""
    out: List[JSON] = json.loads(_cli(p.capsem_bin(capsem), ["ls", "--json"], p.data_dir(data)))
    return out


class Sandbox:
    """A sandbox by name. ``Sandbox.start(name, …)`` creates or starts one;
    ``Sandbox(name)`` attaches to one that runs."""

    def __init__(self, name: str, data: Optional[str] = None, capsem: Optional[str] = None) -> None:
        self.name = name
        self.data = p.data_dir(data)
        self.capsem = p.capsem_bin(capsem)
        self._sock: Optional[str] = None

    @classmethod
    def start(cls, name: str, policy: Optional[str] = None, workspace: Optional[str] = None, env: Env = None,
              secrets: Secrets = None, cpus: Optional[int] = None, memory: Optional[int] = None,
              disk: Optional[int] = None, data: Optional[str] = None, ca_dir: Optional[str] = None,
              capsem: Optional[str] = None, publish: Optional[Sequence[str]] = None) -> "Sandbox":
        """Creates sandbox name the first time, or starts it again with what
        it kept; returns once its guest answers. Arguments given to a
        restart replace the stored ones.

        env is a dict (or K=V strings) for every command in the sandbox:
        nothing of this process's environment enters the guest otherwise.
        secrets are credentials the guest never holds: "NAME" (a well-known
        one, ANTHROPIC_API_KEY → api.anthropic.com) or "NAME@HOST,…"; the
        guest's NAME is a placeholder, replaced by the real value only in
        requests to those hosts. The values are this process's variables of
        those names, or, with a dict {spec: value}, the values given. Only
        the names are kept for a restart, which reads the values again.
        publish is a list of port specs, "[HOSTIP:]HOSTPORT:GUESTPORT"
        (127.0.0.1 unless HOSTIP is given, HOSTPORT 0 for a free one), kept
        for later starts."""
        sb = cls(name, data=data, capsem=capsem)
        args, values = p.start_args(name, policy, workspace, env, secrets, cpus, memory, disk, ca_dir, publish)
        try:
            _cli(sb.capsem, args, sb.data, p.child_env(values))
        except CLIError as e:
            raise p.start_error(e) from None
        return sb

    # The socket: where sandbox/home's rule puts it (home.py), while its
    # supervisor holds the lock; else capsem ls says why there is none.
    def _socket(self) -> str:
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
                    raise SandboxNotRunning(p.not_running(self.name, s["state"]))
                self._sock = str(s["socket"])
                return self._sock
        raise SandboxNotFound(p.no_sandbox(self.name))

    def _api(self, method: str, path: str, body: Optional[Union[bytes, str]] = None,
             headers: Optional[Mapping[str, str]] = None) -> Any:
        with self._gone():
            return request(self._socket(), method, path, body=body, headers=headers)

    def _post_json(self, path: str, obj: Any) -> Any:
        return self._api("POST", path, body=json.dumps(obj).encode(), headers={"Content-Type": "application/json"})

    @contextlib.contextmanager
    def _gone(self) -> Iterator[None]:
        """Turns a socket that is no longer there (the sandbox stopped since
        it was looked up) into SandboxNotRunning or SandboxNotFound."""
        try:
            yield
        except (FileNotFoundError, ConnectionRefusedError):
            self._sock = None
            self._socket()  # raises the typed error when it is not running
            raise

    def _conn(self) -> UnixHTTPConnection:
        conn = UnixHTTPConnection(self._socket())
        with self._gone():
            conn.connect()
        return conn

    def status(self) -> JSON:
        """GET /v1/sandbox."""
        out: JSON = self._api("GET", "/v1/sandbox")
        return out

    def exec(self, cmd: Union[str, Sequence[str]], env: Env = None, timeout: Optional[float] = None,
             workdir: Optional[str] = None, stdin: Union[bytes, str, None] = None) -> Result:
        """Runs cmd (a list of words, or a str run with sh -c) and waits for
        it: its exit code and its stdout and stderr, apart, each cut at
        MAX_BUFFERED (16 MiB; truncated says so — exec_stream streams any
        amount). timeout is in seconds: the command is killed after it
        (exit 124, timed_out)."""
        stream = self.exec_stream(cmd, env=env, timeout=timeout, workdir=workdir, stdin=stdin is not None)
        feeder = None
        if stdin is not None:
            data = stdin if isinstance(stdin, bytes) else stdin.encode()

            def feed() -> None:
                try:
                    stream.send_stdin(data)
                    stream.close_stdin()
                except OSError:
                    pass  # the command ended without reading it all

            feeder = threading.Thread(target=feed, daemon=True)
            feeder.start()
        out, err = bytearray(), bytearray()
        cut = False
        with stream:
            for name, chunk in stream:
                cut = p.keep(out if name == "stdout" else err, chunk) or cut
        if feeder:
            feeder.join(timeout=5)
        return p.result(stream.exit, bytes(out), bytes(err), cut)

    def exec_stream(self, cmd: Union[str, Sequence[str]], env: Env = None, timeout: Optional[float] = None,
                    workdir: Optional[str] = None, tty: bool = False, rows: Optional[int] = None,
                    cols: Optional[int] = None, stdin: bool = True) -> "ExecStream":
        """Starts cmd and returns an ExecStream: iterate it for
        ("stdout"|"stderr", bytes) chunks as the command writes them; send
        stdin, signals and window sizes; its exit once the iteration ends.
        stdin=False: the command's stdin is closed with the request."""
        req = p.exec_request(cmd, env, timeout, workdir, tty, rows, cols)
        with self._gone():
            return ExecStream(self._socket(), req, close_stdin=not stdin)

    def put_file(self, path: str, data: Union[bytes, bytearray, memoryview, BinaryIO],
                 mode: Union[str, int, None] = None) -> JSON:
        """Writes data (bytes, or a binary file object, streamed) to path in
        the guest (absolute, or relative to /workspace), its directory made
        first; mode is an octal string ("0755") or an int (0o755)."""
        url = p.files_url(path, mode)
        conn = self._conn()
        try:
            if isinstance(data, (bytes, bytearray, memoryview)):
                conn.request("PUT", url, body=bytes(data))
            else:
                size = p.file_size(data)
                if size is None:
                    conn.request("PUT", url, body=_chunks(data), encode_chunked=True,
                                 headers={"Transfer-Encoding": "chunked"})
                else:
                    conn.request("PUT", url, body=data, headers={"Content-Length": str(size)})
            resp = conn.getresponse()
            raise_for(resp)
            out: JSON = json.loads(resp.read())
            return out
        finally:
            conn.close()

    @overload
    def get_file(self, path: str) -> bytes: ...

    @overload
    def get_file(self, path: str, fileobj: BinaryIO) -> int: ...

    def get_file(self, path: str, fileobj: Optional[BinaryIO] = None) -> Union[bytes, int]:
        """The guest's file at path: its bytes, or, with fileobj, written
        there (streamed, any size) and its size returned. Without fileobj a
        file over MAX_BUFFERED (16 MiB) raises TooLarge, having read no
        more than that."""
        conn = self._conn()
        try:
            conn.request("GET", p.files_url(path))
            resp = conn.getresponse()
            raise_for(resp)
            want = resp.getheader("Content-Length")
            body = b""
            try:
                if fileobj is None:
                    if want is not None and int(want) > MAX_BUFFERED:
                        raise TooLarge(p.too_large(path, f"{want} bytes"))
                    body = resp.read(MAX_BUFFERED + 1)
                    if len(body) > MAX_BUFFERED:
                        raise TooLarge(p.too_large(path, "over that"))
                    n = len(body)
                else:
                    n = 0
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

    def events(self, since: int = 0, follow: bool = False) -> Iterator[JSON]:
        """The session's events after sequence number since, one dict per
        row of the SQLite export ({"table": "exec_events", …}); with follow
        it goes on until the sandbox stops."""
        return self._lines(p.events_url(since, follow))

    def _lines(self, url: str) -> Iterator[JSON]:
        """GETs url and yields each line of the NDJSON answer, decoded."""
        conn = self._conn()
        try:
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

    @overload
    def asks(self, follow: Literal[False] = False) -> List[JSON]: ...

    @overload
    def asks(self, follow: Literal[True]) -> Iterator[JSON]: ...

    def asks(self, follow: bool = False) -> Union[List[JSON], Iterator[JSON]]:
        """What the sandbox's policy did not foresee ([network] unknown =
        "ask", [mcp] unknown = "ask"). Without follow: the questions
        waiting, a list of dicts (id, kind "network" or "mcp", name, port,
        tool, entry — what an answer of "session" or "always" adds —, asked,
        deadline, waiting). With follow: an iterator of updates, {"type":
        "asked" | "answered", "question": {…}, "reason": …}, the waiting
        questions first; while one is open the sandbox asks rather than
        refuses at once."""
        if not follow:
            out: List[JSON] = self._api("GET", "/v1/asks")
            return out
        return self._lines("/v1/asks?follow=1")

    def answer(self, question_id: str, answer: str, by: str = "api") -> JSON:
        """Answers a question: answer is "once", "session", "always" (kept
        in the sandbox's overlay, policy-asked.toml, for every later start)
        or "deny". A question no longer waiting raises APIError 404."""
        path, body = p.answer_request(question_id, answer, by)
        out: JSON = self._api("POST", path, body=body, headers={"Content-Type": "application/json"})
        return out

    def on_ask(self, decide: Decide, by: str = "api") -> "AskHandler":
        """Answers every question with decide(question) in a thread until
        the returned handle is closed (it is a context manager). decide
        returns "once", "session", "always" or "deny" (True is "once",
        False or None "deny"); an exception in it denies. The handle
        listens from the moment on_ask returns: the sandbox asks, rather
        than refuses, from then on."""
        return AskHandler(self, decide, by)

    def reload_policy(self) -> JSON:
        """Reads the sandbox's policy file again; a broken file raises
        PolicyError (file:line) and keeps the policy in force."""
        try:
            out: JSON = self._api("POST", "/v1/policy/reload")
            return out
        except APIError as e:
            if e.status == 422:
                raise PolicyError(e.message) from None
            raise

    def stop(self) -> None:
        """Powers the guest off (sync, unmount) and waits until it is down;
        the disk and settings are kept. A sandbox that is not running is
        left as it is (a crashed one is marked stopped), as with capsem
        stop; SandboxNotFound when there is no such sandbox."""
        self._lifecycle(["stop", self.name])

    def rm(self, force: bool = False) -> None:
        """Deletes the sandbox and its disk (force: even while it runs). Its
        sessions stay in the event store."""
        self._lifecycle(["rm"] + (["--force"] if force else []) + [self.name])

    def _lifecycle(self, args: List[str]) -> None:
        try:
            _cli(self.capsem, args, self.data)
        except CLIError as e:
            # The state comes from capsem ls, not from parsing messages.
            if not any(s["name"] == self.name for s in ls(self.data, self.capsem)):
                raise p.not_found(self.name, e) from None
            raise
        finally:
            self._sock = None

    def snapshot(self, tag: Optional[str] = None) -> JSON:
        """Saves the running guest — memory, processes, devices and disk at one
        instant — as snapshot tag (default: the time) and lets it go on;
        returns its record (dict: tag, created, bytes, paused_ms,
        session_id, …). A guest process holding /workspace makes it fail
        with APIError 409, naming the process."""
        out: JSON = self._post_json("/v1/snapshots", {"tag": tag} if tag else {})
        return out

    def snapshots(self) -> List[JSON]:
        """The sandbox's snapshots, oldest first (running or not), as
        `capsem snapshots --json` gives them."""
        out: List[JSON] = json.loads(_cli(self.capsem, ["snapshots", "--json", self.name], self.data))
        return out

    def remove_snapshot(self, tag: str) -> None:
        """Removes snapshot tag."""
        _cli(self.capsem, ["snapshot", "rm", self.name, tag], self.data)

    def fork(self, new_name: str, tag: Optional[str] = None, policy: Optional[str] = None,
             workspace: Optional[str] = None, env: Env = None, secrets: Secrets = None, disk: Optional[int] = None,
             ca_dir: Optional[str] = None) -> "Sandbox":
        """Starts sandbox new_name from this sandbox's snapshot tag (the
        newest when None): the same processes, files and memory, its own
        disk, network and session, fresh randomness, the clock set to now.
        It keeps this sandbox's settings but for the arguments given;
        secrets as Sandbox.start takes them (default: as this sandbox was
        started, their values read again). Returns the new Sandbox."""
        args, values = p.fork_args(self.name, tag, new_name, policy, workspace, env, secrets, disk, ca_dir)
        _cli(self.capsem, args, self.data, p.child_env(values))
        return Sandbox(new_name, data=self.data, capsem=self.capsem)

    def ports(self) -> List[JSON]:
        """The published ports in force (dicts: spec, host_ip, host_port,
        guest_port, protocol, published), as GET /v1/ports gives them."""
        out: List[JSON] = self._api("GET", "/v1/ports")
        return out

    def publish(self, spec: str) -> JSON:
        """Publishes a guest port on the host: spec is
        "[HOSTIP:]HOSTPORT:GUESTPORT" (127.0.0.1 unless HOSTIP is given,
        HOSTPORT 0 for a free one). Returns the port in force (its
        host_port is the one taken); kept in the settings for later
        starts. A host port in use is APIError 409."""
        out: JSON = self._post_json("/v1/ports", {"spec": spec})
        return out

    def unpublish(self, spec: str) -> None:
        """Unpublishes the port spec names (its host address and port, or the
        spec as published) and drops it from the settings."""
        self._api("DELETE", p.port_url(spec))

    def suspend(self) -> None:
        """Saves the guest and stops the sandbox (state suspended);
        Sandbox.start(name) resumes it with its processes."""
        try:
            _cli(self.capsem, ["suspend", self.name], self.data)
        finally:
            self._sock = None

    def __repr__(self) -> str:
        return f"Sandbox({self.name!r})"


class ExecStream:
    """A command running through POST /v1/exec upgraded to capsem-exec:
    iterate for its output, then read .exit (a dict: exit_code, signal,
    timed_out, error). Usable as a context manager, which closes the
    connection (a command still running is then hung up on)."""

    def __init__(self, sock_path: str, req: JSON, close_stdin: bool = False) -> None:
        s = connect(sock_path)
        # Frames may follow the request at once (docs/API.md): the end of
        # stdin of a command given none goes with it.
        s.sendall(p.exec_upgrade(req) + (_frames.encode(_frames.STDIN_CLOSE) if close_stdin else b""))
        self._sock: socket.socket = s
        self._r: BinaryIO = s.makefile("rb")
        self._wlock = threading.Lock()
        self.exit: Optional[JSON] = None
        status = self._r.readline().decode("latin-1")
        headers: Dict[str, str] = {}
        while True:
            line = self._r.readline().decode("latin-1").strip()
            if not line:
                break
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        code = p.status_code(status)
        if code != 101:
            n = int(headers.get("content-length", "0") or 0)
            raw = self._r.read(n) if n else b""
            self.close()
            raise APIError(code, p.error_message(status, raw))

    def __iter__(self) -> Iterator["tuple[str, bytes]"]:
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

    def _send(self, typ: int, payload: bytes = b"") -> None:
        # A command that has ended (or never started) has its exit on the
        # way and the server has closed its side: what is sent then has no
        # one to go to, which is not an error of the caller's.
        with self._wlock:
            try:
                self._sock.sendall(_frames.encode(typ, payload))
            except (BrokenPipeError, ConnectionResetError):
                pass

    def send_stdin(self, data: bytes) -> None:
        self._send(_frames.STDIN, data)

    def close_stdin(self) -> None:
        self._send(_frames.STDIN_CLOSE)

    def signal(self, sig: str) -> None:
        """A signal by name without SIG: "INT", "TERM", "KILL", …"""
        self._send(_frames.SIGNAL, sig.encode())

    def resize(self, rows: int, cols: int) -> None:
        self._send(_frames.RESIZE, rows.to_bytes(2, "big") + cols.to_bytes(2, "big"))

    def wait(self) -> int:
        """Drains the output and returns the exit code."""
        for _ in self:
            pass
        return int((self.exit or {}).get("exit_code", -1))

    def close(self) -> None:
        try:
            self._r.close()
        finally:
            self._sock.close()

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AskHandler:
    """Sandbox.on_ask's thread: follows the sandbox's questions and answers
    each with decide(question)."""

    def __init__(self, sb: Sandbox, decide: Decide, by: str) -> None:
        self._sb, self._decide, self._by = sb, decide, by
        self.errors: List[BaseException] = []  # what went wrong answering
        self._conn = sb._conn()
        self._conn.request("GET", "/v1/asks?follow=1")
        self._resp = self._conn.getresponse()  # the listener is registered once the answer starts
        raise_for(self._resp)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"capsem-ask-{sb.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
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
                    a = p.answer_word(self._decide(q))
                except Exception as e:  # a callback that fails denies
                    self.errors.append(e)
                    a = "deny"
                try:
                    self._sb.answer(q["id"], a, by=self._by)
                except APIError as e:
                    if e.status != 404:  # 404: answered elsewhere, or timed out
                        self.errors.append(e)
        except (OSError, ValueError, http.client.HTTPException) as e:
            if not self._closed:
                self.errors.append(e)

    def close(self) -> None:
        """Stops answering: the sandbox refuses what it would have asked."""
        self._closed = True
        try:
            if self._conn.sock:
                self._conn.sock.shutdown(socket.SHUT_RDWR)  # the thread's read ends
        except OSError:
            pass
        self._thread.join(timeout=10)
        self._conn.close()

    def __enter__(self) -> "AskHandler":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _chunks(f: BinaryIO, size: int = 256 << 10) -> Iterator[bytes]:
    while True:
        b = f.read(size)
        if not b:
            return
        yield b


__all__ = ["Sandbox", "Result", "ExecStream", "AskHandler", "ls", "EXIT_TIMEOUT", "MAX_BUFFERED"]
