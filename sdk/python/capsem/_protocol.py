"""What the blocking client (sandbox.py) and the asyncio one (aio.py) both
say and read: the capsem command lines they run, the API requests they
send, and how they read answers into results and typed errors. No I/O
here, so the two cannot drift apart."""

import json
import os
import re
import shutil
from typing import Any, BinaryIO, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlencode

from .errors import AlreadyRunning, CapsemError, CLIError, SandboxNotFound

JSON = Dict[str, Any]

# Env is a command's environment: a dict, or "K=V" strings.
Env = Union[Mapping[str, str], Sequence[str], None]

# Secrets are capsem's --secret: "NAME" (a well-known name bound to its
# provider's API host, ANTHROPIC_API_KEY → api.anthropic.com) or
# "NAME@HOST,…". As a sequence, the real values are this process's
# environment variables of those names; as a mapping spec → value, the
# values given (passed to capsem in its environment, never its argv). The
# guest gets a placeholder; the value leaves the host only in requests to
# the secret's hosts.
Secrets = Union[Sequence[str], Mapping[str, str], None]

EXEC_PROTOCOL = "capsem-exec"
EXIT_TIMEOUT = 124

# MAX_BUFFERED is what exec() keeps of each of stdout and stderr (the rest
# is read and dropped, and Result.truncated says so) and the most get_file()
# returns in memory: the Go API's buffered exec cut, maxBufferedOutput in
# sandbox/api/exec.go, whose value this must stay (a test there checks).
# exec_stream() and get_file() with a file object stream, unbounded.
MAX_BUFFERED = 16 << 20

# What answers a question of the sandbox's (docs/API.md, /v1/asks).
ANSWERS = ("once", "session", "always", "deny")

_SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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


def result(exit: Optional[JSON], out: bytes, err: bytes, truncated: bool) -> Result:
    """The Result of a command whose exit frame said exit."""
    x = exit or {}
    return Result(int(x.get("exit_code", -1)), out, err, bool(x.get("timed_out")), x.get("signal"),
                  x.get("error"), truncated)


def keep(buf: bytearray, chunk: bytes) -> bool:
    """Adds chunk to buf up to MAX_BUFFERED; whether some was cut."""
    room = MAX_BUFFERED - len(buf)
    cut = len(chunk) > room
    buf.extend(chunk[:room] if cut else chunk)
    return cut


def capsem_bin(explicit: Optional[str] = None) -> str:
    b = explicit or os.environ.get("CAPSEM_BIN") or shutil.which("capsem")
    if not b:
        raise CapsemError("the capsem binary is not found: pass capsem=PATH, set CAPSEM_BIN, or put capsem on PATH")
    return b


def data_dir(explicit: Optional[str] = None) -> Optional[str]:
    return explicit or os.environ.get("CAPSEM_DATA") or None


def cli_args(args: Sequence[str], data: Optional[str]) -> List[str]:
    """`SUB [--data D] ARGS…` for args = [SUB, ARGS…]."""
    return [args[0]] + (["--data", data] if data else []) + list(args[1:])


def env_list(env: Env) -> List[str]:
    if env is None:
        return []
    if isinstance(env, Mapping):
        return [f"{k}={v}" for k, v in env.items()]
    return list(env)


def secret_args(secrets: Secrets) -> Tuple[List[str], Dict[str, str]]:
    """The --secret flags for secrets, and the variables capsem's
    environment needs beyond this process's (the values of a mapping)."""
    if secrets is None:
        return [], {}
    if isinstance(secrets, str):
        raise TypeError('secrets is a list of "NAME[@HOST,…]" (or a dict of them to values), not one string')
    args: List[str] = []
    values: Dict[str, str] = {}
    for spec in secrets:
        name = spec.split("@", 1)[0]
        if not _SECRET_NAME.match(name):
            raise ValueError(f"secret {spec!r}: NAME must be an environment variable name, as in "
                             "\"ANTHROPIC_API_KEY\" or \"MY_TOKEN@api.example.com\"")
        args += ["--secret", spec]
        if isinstance(secrets, Mapping):
            values[name] = secrets[spec]
    return args, values


def start_args(name: str, policy: Optional[str], workspace: Optional[str], env: Env, secrets: Secrets,
               cpus: Optional[int], memory: Optional[int], disk: Optional[int], ca_dir: Optional[str],
               publish: Optional[Sequence[str]]) -> Tuple[List[str], Dict[str, str]]:
    """`capsem start`'s arguments (without --data), and the secret values
    its environment needs."""
    args = ["start"]
    for flag, value in (("--policy", policy), ("--workspace", workspace), ("--cpus", cpus),
                        ("--memory", memory), ("--disk", disk), ("--ca-dir", ca_dir)):
        if value is not None:
            args += [flag, str(value)]
    for kv in env_list(env):
        args += ["--env", kv]
    sargs, values = secret_args(secrets)
    args += sargs
    for spec in publish or ():
        args += ["--publish", spec]
    return args + [name], values


def fork_args(source: str, tag: Optional[str], new_name: str, policy: Optional[str], workspace: Optional[str],
              env: Env, secrets: Secrets, disk: Optional[int], ca_dir: Optional[str]) -> Tuple[List[str], Dict[str, str]]:
    """`capsem start --from`'s arguments, and the secret values its
    environment needs."""
    args = ["start", "--from", source + ("@" + tag if tag else "")]
    for flag, value in (("--policy", policy), ("--workspace", workspace), ("--disk", disk), ("--ca-dir", ca_dir)):
        if value is not None:
            args += [flag, str(value)]
    for kv in env_list(env):
        args += ["--env", kv]
    sargs, values = secret_args(secrets)
    return args + sargs + [new_name], values


def child_env(values: Mapping[str, str]) -> Optional[Dict[str, str]]:
    """The environment capsem runs with: this process's, with the secret
    values given as a mapping (None: just this process's)."""
    if not values:
        return None
    e = dict(os.environ)
    e.update(values)
    return e


def start_error(e: CLIError) -> Exception:
    """What a failed `capsem start` raises."""
    if e.code == 1 and "already running" in e.stderr:
        return AlreadyRunning(e.stderr.strip())
    return e


def not_found(name: str, e: CLIError) -> SandboxNotFound:
    return SandboxNotFound(f"no sandbox {name}: {e.stderr.strip()}")


def exec_request(cmd: Union[str, Sequence[str]], env: Env, timeout: Optional[float], workdir: Optional[str],
                 tty: bool = False, rows: Optional[int] = None, cols: Optional[int] = None) -> JSON:
    """POST /v1/exec's body: a str runs with sh -c."""
    argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
    req: JSON = {"argv": argv, "env": env_list(env)}
    if workdir:
        req["workdir"] = workdir
    if timeout is not None:
        req["timeout_ms"] = max(1, int(timeout * 1000))
    if tty:
        req.update(tty=True, rows=rows or 24, cols=cols or 80)
    return req


def exec_upgrade(req: JSON) -> bytes:
    """The request that starts a streamed exec (upgraded to capsem-exec)."""
    body = json.dumps(req).encode()
    return (b"POST /v1/exec HTTP/1.1\r\nHost: capsem\r\nContent-Type: application/json\r\n"
            b"Connection: Upgrade\r\nUpgrade: " + EXEC_PROTOCOL.encode() + b"\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def status_code(status_line: str) -> int:
    parts = status_line.split(" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def error_message(status: str, body: bytes) -> str:
    """The message of an error answer: its JSON "error", else the status
    and the start of the body."""
    try:
        return str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError):
        return f"{status.strip()}: {body[:200]!r}"


def files_url(path: str, mode: Union[str, int, None] = None) -> str:
    q = {"path": path}
    if mode is not None:
        q["mode"] = mode if isinstance(mode, str) else oct(mode)[2:]
    return "/v1/files?" + urlencode(q)


def events_url(since: int, follow: bool) -> str:
    q = {"since": str(since)}
    if follow:
        q["follow"] = "1"
    return "/v1/events?" + urlencode(q)


def port_url(spec: str) -> str:
    """DELETE /v1/ports's path for the port spec names."""
    return "/v1/ports?spec=" + quote(spec, safe="")


def answer_request(question_id: str, answer: Any, by: str) -> Tuple[str, bytes]:
    """POST /v1/asks/ID's path and body; answer as Sandbox.answer takes it."""
    return "/v1/asks/" + quote(question_id, safe=""), json.dumps({"answer": answer, "by": by}).encode()


def answer_word(a: Any) -> str:
    """What on_ask's decide returned, as an answer: True is once, False or
    None deny."""
    if a is True:
        return "once"
    if a is False or a is None:
        return "deny"
    return str(a)


def file_size(f: BinaryIO) -> Optional[int]:
    """What is left to read of the file f, when it is a regular file."""
    try:
        st = os.fstat(f.fileno())
        return st.st_size - f.tell()
    except (AttributeError, OSError, ValueError):
        return None


def too_large(path: str, size: str) -> str:
    return (f"{path}: {size}, more than the {MAX_BUFFERED >> 20} MiB get_file() returns in memory: "
            "pass a file object (get_file(path, fileobj)) to stream it")


def not_running(name: str, state: str) -> str:
    return f"sandbox {name} is {state}: Sandbox.start({name!r}) starts it"


def no_sandbox(name: str) -> str:
    return f"no sandbox {name}: Sandbox.start({name!r}) creates it"
