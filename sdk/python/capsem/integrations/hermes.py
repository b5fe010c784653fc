"""A capsem execution environment for hermes-agent (NousResearch's agent):
its terminal, file and code tools run their commands through an
environment object, one per task, with

    execute(command, cwd="", *, timeout=None, stdin_data=None) -> {"output": str, "returncode": int}
    cleanup()            # idempotent, safe on a half-built object; stop() is the same

as hermes-agent's tools/environments/base.py (BaseEnvironment) has it, read
at its commit 82b49660 (July 2026), whose tests fix the outcomes kept here:
stdout and stderr in one "output" in the order written; the working
directory and exported variables carried from one command to the next
(`cd /tmp` then `pwd` gives /tmp); a timeout's code 124 with the partial
output and "[Command timed out after Ns]", and the next command works; 126
when the working directory cannot be entered; other codes as the command
gave them.

Each environment is one capsem sandbox, named after the task
(capsem.naming), so the guest is a VM whose only way out is capsem's
filter: the policy decides every connection, credentials are secrets (the
guest holds placeholders), every command is recorded. hermes-agent need not
be installed to use this; to plug it in:

- hermes-agent with the terminal backend plugin registry
  (tools/environments/registry.py): this module is the
  "hermes_agent.plugins" entry point of the capsem package, and register(ctx)
  registers the backend "capsem"; select it with TERMINAL_ENV=capsem.
  Its settings (plugins.entries.capsem.terminal_backend) are
  CapsemEnvironment's keyword arguments: policy, secrets, workspace, cpus,
  memory, disk, persistent.
- earlier hermes-agent: return CapsemEnvironment(cwd=cwd, timeout=timeout,
  task_id=task_id) for env_type "capsem" in tools/terminal_tool.py's
  _create_environment.

What it must never do: put a credential in the guest's environment (env
refuses credential-looking names unless allow_credential_env is set; use
secrets), or decide policy: the policy file does.
"""

import shlex
import threading
import uuid
from typing import Any, Dict, Mapping, Optional

from .. import _protocol as p
from ..envnames import credential_like
from ..errors import AlreadyRunning, CapsemError, SandboxNotFound, SandboxNotRunning
from ..naming import sandbox_name
from ..sandbox import Sandbox

# BACKEND is the name hermes-agent selects this backend by (TERMINAL_ENV).
BACKEND = "capsem"

# A working directory hermes-agent's tests expect a failed cd to give.
EXIT_NO_CWD = 126

_STATE_DIR = "/tmp"


class CapsemEnvironment:
    """One task's commands in one capsem sandbox (created on the first
    command, or at once with eager=True).

    cwd: where commands start (hermes-agent's default for sandboxes, /root);
    each command's final directory becomes the next one's. timeout: seconds
    a command may run (execute's timeout overrides). env: variables for
    every command, not credentials (see secrets). task_id: the sandbox's
    name is capsem.naming.sandbox_name(task_id, prefix). policy, secrets,
    workspace, cpus, memory, disk, data, ca_dir, capsem: as
    capsem.Sandbox.start. persistent: cleanup() stops the sandbox and keeps
    its disk for the task's next environment (hermes-agent's
    persistent_filesystem); False removes it.
    """

    def __init__(self, cwd: str = "/root", timeout: int = 60, env: Optional[Mapping[str, str]] = None, *,
                 task_id: str = "default", prefix: str = "hermes-", policy: Optional[str] = None,
                 secrets: p.Secrets = None, workspace: Optional[str] = None, cpus: Optional[int] = None,
                 memory: Optional[int] = None, disk: Optional[int] = None, data: Optional[str] = None,
                 ca_dir: Optional[str] = None, capsem: Optional[str] = None, persistent: bool = True,
                 allow_credential_env: bool = False, eager: bool = False, **_: Any) -> None:
        self._sb: Optional[Sandbox] = None  # first, so that cleanup() of a half-built object works
        self._lock = threading.Lock()
        risky = [k for k in (env or {}) if credential_like(k)]
        if risky and not allow_credential_env:
            raise ValueError(f"env holds {', '.join(risky)}, which look like credentials: their values would be "
                             "in the guest. Pass them as secrets=[...] (the guest gets a placeholder and the value "
                             "goes only to the secret's hosts), or allow_credential_env=True if they are not credentials")
        self.cwd = cwd or "/root"
        self.timeout = timeout
        self.env: Dict[str, str] = dict(env or {})
        self.task_id = task_id
        self.name = sandbox_name(task_id, prefix)
        self.persistent = persistent
        self._start = dict(policy=policy, secrets=secrets, workspace=workspace, cpus=cpus, memory=memory,
                           disk=disk, ca_dir=ca_dir)
        self._data, self._capsem = data, capsem
        # This environment's files in the guest: the exported variables
        # its commands leave (sourced by the next), kept apart from other
        # environments on the same sandbox.
        self._snapshot = f"{_STATE_DIR}/capsem-hermes-{uuid.uuid4().hex[:12]}.env"
        if eager:
            self._sandbox()

    def _sandbox(self) -> Sandbox:
        with self._lock:
            if self._sb is None:
                try:
                    self._sb = Sandbox.start(self.name, data=self._data, capsem=self._capsem, **self._start)  # type: ignore[arg-type]
                except AlreadyRunning:  # the task's sandbox, started by an earlier environment
                    self._sb = Sandbox(self.name, data=self._data, capsem=self._capsem)
            return self._sb

    def get_temp_dir(self) -> str:
        return _STATE_DIR

    def _script(self, command: str, cwd: str) -> str:
        # stdout and stderr of the command are one stream (fd 1); the
        # directory it ends in goes to the exec's stderr (fd 3 → 2), so no
        # marker is parsed out of the command's own output.
        snap = shlex.quote(self._snapshot)
        return "\n".join([
            "exec 3>&2 2>&1",
            f"[ -r {snap} ] && . {snap}",
            f"builtin cd -- {_quote_dir(cwd)} || exit {EXIT_NO_CWD}",
            f"eval {shlex.quote(command)}",
            "__capsem_ec=$?",
            f"export -p > {snap}.$$ 2>/dev/null && mv -f {snap}.$$ {snap}",
            "pwd -P >&3",
            "exit $__capsem_ec",
        ])

    def execute(self, command: str, cwd: str = "", *, timeout: Optional[int] = None,
                stdin_data: Optional[str] = None, **_: Any) -> Dict[str, Any]:
        """Runs command (a bash command line) in cwd (default: where the
        last one ended) and returns {"output", "returncode"}."""
        limit = timeout or self.timeout
        argv = ["bash", "-c", self._script(command, cwd or self.cwd)]
        try:
            r = self._sandbox().exec(argv, env=self.env, timeout=limit, stdin=stdin_data)
        except (SandboxNotRunning, SandboxNotFound):
            # Stopped or removed behind this environment's back (capsem
            # stop, a crash): started again once, as hermes-agent's docker
            # backend recreates a vanished container.
            with self._lock:
                self._sb = None
            r = self._sandbox().exec(argv, env=self.env, timeout=limit, stdin=stdin_data)
        out = r.stdout.decode("utf-8", errors="replace")
        if r.truncated:
            out += f"\n[capsem: output cut at {p.MAX_BUFFERED >> 20} MiB]"
        where = r.stderr.decode("utf-8", errors="replace").strip().splitlines()
        if where and where[-1].startswith("/"):
            self.cwd = where[-1]
        if r.timed_out:
            notice = f"[Command timed out after {limit}s]"  # hermes-agent's words, after the partial output
            out = out + "\n" + notice if out else notice
            return {"output": out, "returncode": p.EXIT_TIMEOUT}
        if r.error and r.exit_code < 0:
            out += f"\n[capsem: {r.error}]"
        return {"output": out, "returncode": r.exit_code}

    def cleanup(self, force_remove: bool = False) -> None:
        """Stops the sandbox, keeping its disk (persistent), or removes it
        (not persistent, or force_remove). Idempotent."""
        with self._lock:
            sb, self._sb = self._sb, None
        if sb is None:
            return
        try:
            if self.persistent and not force_remove:
                sb.stop()
            else:
                sb.rm(force=True)
        except SandboxNotFound:
            pass

    def stop(self) -> None:
        self.cleanup()

    def __del__(self) -> None:
        try:
            self.cleanup()
        except (CapsemError, OSError, AttributeError):
            pass


def _quote_dir(d: str) -> str:
    """A directory for cd: ~ and ~/… stay the home directory's."""
    if d == "~":
        return "$HOME"
    if d.startswith("~/"):
        return "$HOME/" + shlex.quote(d[2:])
    return shlex.quote(d)


def backend_factory(request: Any) -> CapsemEnvironment:
    """hermes-agent's terminal backend factory: request has name, task_id,
    cwd, timeout and settings (CapsemEnvironment's keyword arguments)."""
    settings: Dict[str, Any] = dict(getattr(request, "settings", None) or {})
    allowed = {"policy", "secrets", "workspace", "cpus", "memory", "disk", "data", "ca_dir", "capsem",
               "persistent", "prefix", "env"}
    unknown = sorted(set(settings) - allowed)
    if unknown:
        raise ValueError(f"capsem backend settings: unknown {', '.join(unknown)} (known: {', '.join(sorted(allowed))})")
    env = settings.pop("env", None)
    return CapsemEnvironment(cwd=getattr(request, "cwd", "") or "/root", timeout=int(getattr(request, "timeout", 0) or 60),
                             env=env, task_id=str(getattr(request, "task_id", "default") or "default"), **settings)


def register(ctx: Any) -> None:
    """The hermes_agent.plugins entry point: registers the "capsem" terminal
    backend with hermes-agent's registry."""
    from tools.environments.registry import TerminalBackendDefinition  # type: ignore[import]  # hermes-agent's

    ctx.register_terminal_backend(TerminalBackendDefinition(name=BACKEND, factory=backend_factory,
                                                            default_cwd="/root"))


__all__ = ["CapsemEnvironment", "backend_factory", "register", "BACKEND", "EXIT_NO_CWD"]
