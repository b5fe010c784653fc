"""capsem for asyncio: the blocking client's API (capsem.Sandbox, ls) with
coroutines, for frameworks that are async throughout. Nothing here blocks
the event loop: the API is spoken over asyncio's unix streams
(_aiohttp.py) and the capsem CLI runs as an asyncio subprocess.

    from capsem import aio
    sb = await aio.Sandbox.start("task-1", secrets=["ANTHROPIC_API_KEY"])
    r = await sb.exec(["pytest", "-q"], timeout=600)
    async with await sb.exec_stream("make -j2") as s:
        async for stream, chunk in s:
            print(stream, chunk)
    await sb.rm(force=True)

What each method does is the blocking one's (capsem.sandbox); a method
that returns an iterator there (events, asks with follow) returns an
async iterator here, used with async for (no await)."""

import asyncio
import inspect
import json
import os
import socket
import subprocess
from typing import Any, AsyncIterator, BinaryIO, Callable, Dict, List, Literal, Optional, Sequence, Union, overload

from . import _aiohttp as h, _frames, _protocol as p, home
from ._protocol import EXIT_TIMEOUT, JSON, MAX_BUFFERED, Env, Result, Secrets
from .errors import APIError, CapsemError, CLIError, PolicyError, SandboxNotFound, SandboxNotRunning, TooLarge

# Decide answers a question (a dict): "once", "session", "always", "deny",
# True, False or None, or an awaitable of one.
Decide = Callable[[JSON], Any]

FileData = Union[bytes, bytearray, memoryview, BinaryIO, AsyncIterator[bytes]]


async def _cli(capsem: str, args: Sequence[str], data: Optional[str] = None,
               env: Optional[Dict[str, str]] = None) -> str:
    full = p.cli_args(args, data)
    proc = await asyncio.create_subprocess_exec(capsem, *full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE, env=env)
    out, err = await proc.communicate()
    code = proc.returncode if proc.returncode is not None else -1
    if code != 0:
        raise CLIError(code, err.decode(errors="replace"), full)
    return out.decode(errors="replace")


async def ls(data: Optional[str] = None, capsem: Optional[str] = None) -> List[JSON]:
    """Every sandbox, as `capsem ls --json` gives it (capsem.ls)."""
    out: List[JSON] = json.loads(await _cli(p.capsem_bin(capsem), ["ls", "--json"], p.data_dir(data)))
    return out


class Sandbox:
    """A sandbox by name: ``await Sandbox.start(name, …)`` creates or starts
    one; ``Sandbox(name)`` attaches to one that runs."""

    def __init__(self, name: str, data: Optional[str] = None, capsem: Optional[str] = None) -> None:
        self.name = name
        self.data = p.data_dir(data)
        self.capsem = p.capsem_bin(capsem)
        self._sock: Optional[str] = None

    @classmethod
    async def start(cls, name: str, policy: Optional[str] = None, workspace: Optional[str] = None,
                    env: Env = None, secrets: Secrets = None, cpus: Optional[int] = None,
                    memory: Optional[int] = None, disk: Optional[int] = None, data: Optional[str] = None,
                    ca_dir: Optional[str] = None, capsem: Optional[str] = None,
                    publish: Optional[Sequence[str]] = None) -> "Sandbox":
        """capsem.Sandbox.start: secrets are "NAME[@HOST,…]" (values from
        this process's environment) or a dict of them to values; the guest
        holds placeholders."""
        sb = cls(name, data=data, capsem=capsem)
        args, values = p.start_args(name, policy, workspace, env, secrets, cpus, memory, disk, ca_dir, publish)
        try:
            await _cli(sb.capsem, args, sb.data, p.child_env(values))
        except CLIError as e:
            raise p.start_error(e) from None
        return sb

    async def _socket(self) -> str:
        if self._sock and os.path.exists(self._sock):
            return self._sock
        data = self.data or home.default_data_dir()
        if home.NAME_RULE.match(self.name) and home.locked(data, self.name):
            sock = home.socket_path(data, self.name)
            if os.path.exists(sock):
                self._sock = sock
                return sock
        for s in await ls(self.data, self.capsem):
            if s["name"] == self.name:
                if s["state"] != "running":
                    raise SandboxNotRunning(p.not_running(self.name, s["state"]))
                self._sock = str(s["socket"])
                return self._sock
        raise SandboxNotFound(p.no_sandbox(self.name))

    async def _open(self, method: str, url: str, body: h.Body = None, headers: Optional[Dict[str, str]] = None,
                    length: Optional[int] = None) -> h.Response:
        """A request's answer, its status checked; a sandbox gone since it
        was looked up raises SandboxNotRunning or SandboxNotFound."""
        try:
            resp = await h.open_request(await self._socket(), method, url, body, headers, length)
        except (FileNotFoundError, ConnectionRefusedError):
            self._sock = None
            await self._socket()
            raise
        await resp.raise_for()
        return resp

    async def _api(self, method: str, url: str, obj: Any = None) -> Any:
        body = None if obj is None else json.dumps(obj).encode()
        resp = await self._open(method, url, body, {"Content-Type": "application/json"} if body else None)
        try:
            data = await resp.read()
            return json.loads(data) if data else None
        finally:
            resp.close()

    async def status(self) -> JSON:
        out: JSON = await self._api("GET", "/v1/sandbox")
        return out

    async def exec(self, cmd: Union[str, Sequence[str]], env: Env = None, timeout: Optional[float] = None,
                   workdir: Optional[str] = None, stdin: Union[bytes, str, None] = None) -> Result:
        """capsem.Sandbox.exec: the exit code and stdout and stderr, each cut
        at MAX_BUFFERED (16 MiB)."""
        stream = await self.exec_stream(cmd, env=env, timeout=timeout, workdir=workdir, stdin=stdin is not None)
        feeder: Optional["asyncio.Task[None]"] = None
        if stdin is not None:
            data = stdin if isinstance(stdin, bytes) else stdin.encode()

            async def feed() -> None:
                try:
                    await stream.send_stdin(data)
                    await stream.close_stdin()
                except OSError:
                    pass  # the command ended without reading it all

            feeder = asyncio.create_task(feed())
        out, err = bytearray(), bytearray()
        cut = False
        async with stream:
            async for name, chunk in stream:
                cut = p.keep(out if name == "stdout" else err, chunk) or cut
        if feeder:
            feeder.cancel()
        return p.result(stream.exit, bytes(out), bytes(err), cut)

    async def exec_stream(self, cmd: Union[str, Sequence[str]], env: Env = None, timeout: Optional[float] = None,
                          workdir: Optional[str] = None, tty: bool = False, rows: Optional[int] = None,
                          cols: Optional[int] = None, stdin: bool = True) -> "ExecStream":
        """capsem.Sandbox.exec_stream: async for over the returned stream
        gives ("stdout"|"stderr", bytes) as the command writes them.
        stdin=False: the command's stdin is closed with the request."""
        req = p.exec_request(cmd, env, timeout, workdir, tty, rows, cols)
        try:
            reader, writer = await h.connect(await self._socket())
        except (FileNotFoundError, ConnectionRefusedError):
            self._sock = None
            await self._socket()
            raise
        return await ExecStream._open(reader, writer, req, close_stdin=not stdin)

    async def put_file(self, path: str, data: FileData, mode: Union[str, int, None] = None) -> JSON:
        """capsem.Sandbox.put_file; data may also be an async iterator of
        bytes (sent chunked)."""
        url = p.files_url(path, mode)
        length: Optional[int] = None
        body: h.Body
        if isinstance(data, (bytes, bytearray, memoryview)):
            body = bytes(data)
        elif hasattr(data, "__aiter__"):
            body = data  # type: ignore[assignment]  # an AsyncIterator[bytes], by the check above
        else:
            f: BinaryIO = data
            length = p.file_size(f)
            body = _file_chunks(f)
        resp = await self._open("PUT", url, body, None, length)
        try:
            out: JSON = json.loads(await resp.read())
            return out
        finally:
            resp.close()

    @overload
    async def get_file(self, path: str) -> bytes: ...

    @overload
    async def get_file(self, path: str, fileobj: BinaryIO) -> int: ...

    async def get_file(self, path: str, fileobj: Optional[BinaryIO] = None) -> Union[bytes, int]:
        """capsem.Sandbox.get_file: the bytes (at most MAX_BUFFERED, else
        TooLarge), or written to fileobj as they come and the size
        returned."""
        resp = await self._open("GET", p.files_url(path))
        try:
            want = resp.headers.get("content-length")
            if fileobj is None:
                if want is not None and int(want) > MAX_BUFFERED:
                    raise TooLarge(p.too_large(path, f"{want} bytes"))
                body = await resp.read(MAX_BUFFERED + 1)
                if len(body) > MAX_BUFFERED:
                    raise TooLarge(p.too_large(path, "over that"))
                n = len(body)
            else:
                body, n = b"", 0
                while True:
                    chunk = await resp.read1()
                    if not chunk:
                        break
                    fileobj.write(chunk)
                    n += len(chunk)
            if want is not None and n != int(want):
                raise CapsemError(f"{path}: got {n} of {want} bytes")
            return body if fileobj is None else n
        finally:
            resp.close()

    def events(self, since: int = 0, follow: bool = False) -> AsyncIterator[JSON]:
        """capsem.Sandbox.events, as an async iterator."""
        return self._lines(p.events_url(since, follow))

    async def _lines(self, url: str) -> AsyncIterator[JSON]:
        resp = await self._open("GET", url)
        try:
            while True:
                line = await resp.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            resp.close()

    @overload
    def asks(self, follow: Literal[False] = False) -> "asyncio.Future[List[JSON]]": ...

    @overload
    def asks(self, follow: Literal[True]) -> AsyncIterator[JSON]: ...

    def asks(self, follow: bool = False) -> Union["asyncio.Future[List[JSON]]", AsyncIterator[JSON]]:
        """capsem.Sandbox.asks: ``await sb.asks()`` is the questions
        waiting; ``async for u in sb.asks(follow=True)`` the updates."""
        if follow:
            return self._lines("/v1/asks?follow=1")
        return asyncio.ensure_future(self._api("GET", "/v1/asks"))

    async def answer(self, question_id: str, answer: str, by: str = "api") -> JSON:
        """capsem.Sandbox.answer."""
        url, body = p.answer_request(question_id, answer, by)
        resp = await self._open("POST", url, body, {"Content-Type": "application/json"})
        try:
            out: JSON = json.loads(await resp.read())
            return out
        finally:
            resp.close()

    def on_ask(self, decide: Decide, by: str = "api") -> "AskHandler":
        """capsem.Sandbox.on_ask in a task: ``async with sb.on_ask(decide):``
        (or ``h = await sb.on_ask(decide)`` … ``await h.close()``). decide
        may be a coroutine function. The sandbox asks, rather than refuses,
        once the handle is entered or awaited."""
        return AskHandler(self, decide, by)

    async def reload_policy(self) -> JSON:
        """capsem.Sandbox.reload_policy: PolicyError keeps the policy in force."""
        try:
            out: JSON = await self._api("POST", "/v1/policy/reload")
            return out
        except APIError as e:
            if e.status == 422:
                raise PolicyError(e.message) from None
            raise

    async def stop(self) -> None:
        """capsem.Sandbox.stop."""
        await self._lifecycle(["stop", self.name])

    async def rm(self, force: bool = False) -> None:
        """capsem.Sandbox.rm."""
        await self._lifecycle(["rm"] + (["--force"] if force else []) + [self.name])

    async def _lifecycle(self, args: List[str]) -> None:
        try:
            await _cli(self.capsem, args, self.data)
        except CLIError as e:
            if not any(s["name"] == self.name for s in await ls(self.data, self.capsem)):
                raise p.not_found(self.name, e) from None
            raise
        finally:
            self._sock = None

    async def snapshot(self, tag: Optional[str] = None) -> JSON:
        """capsem.Sandbox.snapshot."""
        out: JSON = await self._api("POST", "/v1/snapshots", {"tag": tag} if tag else {})
        return out

    async def snapshots(self) -> List[JSON]:
        """capsem.Sandbox.snapshots."""
        out: List[JSON] = json.loads(await _cli(self.capsem, ["snapshots", "--json", self.name], self.data))
        return out

    async def remove_snapshot(self, tag: str) -> None:
        await _cli(self.capsem, ["snapshot", "rm", self.name, tag], self.data)

    async def fork(self, new_name: str, tag: Optional[str] = None, policy: Optional[str] = None,
                   workspace: Optional[str] = None, env: Env = None, secrets: Secrets = None,
                   disk: Optional[int] = None, ca_dir: Optional[str] = None) -> "Sandbox":
        """capsem.Sandbox.fork."""
        args, values = p.fork_args(self.name, tag, new_name, policy, workspace, env, secrets, disk, ca_dir)
        await _cli(self.capsem, args, self.data, p.child_env(values))
        return Sandbox(new_name, data=self.data, capsem=self.capsem)

    async def ports(self) -> List[JSON]:
        out: List[JSON] = await self._api("GET", "/v1/ports")
        return out

    async def publish(self, spec: str) -> JSON:
        """capsem.Sandbox.publish."""
        out: JSON = await self._api("POST", "/v1/ports", {"spec": spec})
        return out

    async def unpublish(self, spec: str) -> None:
        await self._api("DELETE", p.port_url(spec))

    async def suspend(self) -> None:
        """capsem.Sandbox.suspend."""
        try:
            await _cli(self.capsem, ["suspend", self.name], self.data)
        finally:
            self._sock = None

    def __repr__(self) -> str:
        return f"aio.Sandbox({self.name!r})"


class ExecStream:
    """capsem.ExecStream over asyncio: ``async for stream, chunk in s``,
    then .exit; an async context manager that closes the connection."""

    def __init__(self, reader: "asyncio.StreamReader", writer: "asyncio.StreamWriter") -> None:
        self._r, self._w = reader, writer
        # Frames go out through a duplicate of the connection's socket, not
        # the transport: a write to a command that has ended (a broken
        # pipe) makes asyncio's transport fail its reader too, and the exit
        # frame already received would be lost with it.
        self._out = socket.socket(fileno=os.dup(writer.get_extra_info("socket").fileno()))
        self._out.setblocking(False)
        self._wlock = asyncio.Lock()
        self.exit: Optional[JSON] = None

    @classmethod
    async def _open(cls, reader: "asyncio.StreamReader", writer: "asyncio.StreamWriter", req: JSON,
                    close_stdin: bool) -> "ExecStream":
        s = cls(reader, writer)
        try:
            # Frames may follow the request at once (docs/API.md): the
            # end of stdin of a command given none goes with it.
            first = p.exec_upgrade(req) + (_frames.encode(_frames.STDIN_CLOSE) if close_stdin else b"")
            await asyncio.get_running_loop().sock_sendall(s._out, first)
            status, headers = await h.read_head(reader)
            code = p.status_code(status)
            if code != 101:
                n = int(headers.get("content-length", "0") or 0)
                raw = await reader.readexactly(n) if n else b""
                raise APIError(code, p.error_message(status, raw))
        except BaseException:
            s.close()
            raise
        return s

    async def __aiter__(self) -> AsyncIterator["tuple[str, bytes]"]:
        while self.exit is None:
            try:
                typ, n = _frames.header(await self._r.readexactly(_frames.HEADER.size))
                payload = await self._r.readexactly(n) if n else b""
            except (asyncio.IncompleteReadError, OSError) as e:
                self.exit = {"exit_code": -1, "error": str(e) or "the exec's connection ended before its exit"}
                return
            if typ == _frames.STDOUT:
                yield "stdout", payload
            elif typ == _frames.STDERR:
                yield "stderr", payload
            elif typ == _frames.EXIT:
                self.exit = json.loads(payload)

    async def _send(self, typ: int, payload: bytes = b"") -> None:
        # As the blocking stream: after the command's end there is nobody
        # to send to, which is not the caller's error.
        async with self._wlock:
            try:
                await asyncio.get_running_loop().sock_sendall(self._out, _frames.encode(typ, payload))
            except (BrokenPipeError, ConnectionResetError):
                pass

    async def send_stdin(self, data: bytes) -> None:
        await self._send(_frames.STDIN, data)

    async def close_stdin(self) -> None:
        await self._send(_frames.STDIN_CLOSE)

    async def signal(self, sig: str) -> None:
        """A signal by name without SIG: "INT", "TERM", "KILL", …"""
        await self._send(_frames.SIGNAL, sig.encode())

    async def resize(self, rows: int, cols: int) -> None:
        await self._send(_frames.RESIZE, rows.to_bytes(2, "big") + cols.to_bytes(2, "big"))

    async def wait(self) -> int:
        """Drains the output and returns the exit code."""
        async for _ in self:
            pass
        return int((self.exit or {}).get("exit_code", -1))

    def close(self) -> None:
        self._out.close()
        self._w.close()

    async def __aenter__(self) -> "ExecStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class AskHandler:
    """Sandbox.on_ask's task: follows the sandbox's questions and answers
    each with decide(question)."""

    def __init__(self, sb: Sandbox, decide: Decide, by: str) -> None:
        self._sb, self._decide, self._by = sb, decide, by
        self.errors: List[BaseException] = []
        self._resp: Optional[h.Response] = None
        self._task: Optional["asyncio.Task[None]"] = None

    async def _start(self) -> "AskHandler":
        if self._task is None:
            self._resp = await self._sb._open("GET", "/v1/asks?follow=1")  # listening from its answer on
            self._task = asyncio.create_task(self._run(self._resp))
        return self

    def __await__(self) -> Any:
        return self._start().__await__()

    async def _run(self, resp: h.Response) -> None:
        try:
            while True:
                line = await resp.readline()
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
                    if inspect.isawaitable(a):
                        a = await a
                    word = p.answer_word(a)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # a callback that fails denies
                    self.errors.append(e)
                    word = "deny"
                try:
                    await self._sb.answer(q["id"], word, by=self._by)
                except APIError as e:
                    if e.status != 404:  # 404: answered elsewhere, or timed out
                        self.errors.append(e)
        except (OSError, ValueError, CapsemError) as e:
            self.errors.append(e)

    async def close(self) -> None:
        """Stops answering: the sandbox refuses what it would have asked."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self._resp is not None:
            self._resp.close()

    async def __aenter__(self) -> "AskHandler":
        return await self._start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def _file_chunks(f: BinaryIO, size: int = 256 << 10) -> AsyncIterator[bytes]:
    while True:
        b = f.read(size)
        if not b:
            return
        yield b


__all__ = ["Sandbox", "ExecStream", "AskHandler", "Result", "ls", "EXIT_TIMEOUT", "MAX_BUFFERED"]
