"""A terminal backend for agent frameworks, on capsem sandboxes.

Agent frameworks plug a sandbox in as a "terminal": one per task, a command
in, its output and exit code out, and a cleanup when the task is done. This
is that, with capsem's walls: one long-lived sandbox per task_id (what one
command leaves is there for the next), the host's environment passed only
from an explicit allowlist, timeouts as exit code 124, and every command,
flow and model call recorded in capsem's event store.

    backend = CapsemTerminalBackend(policy="agent-policy.toml", env_allowlist=["ANTHROPIC_API_KEY"])
    r = backend.run("pip install requests && python3 -c 'import requests'", task_id="task-17")
    print(r["exit_code"], r["output"])
    backend.cleanup("task-17")
"""

import os
import sys

import capsem
from capsem.naming import sandbox_name

__all__ = ["CapsemTerminalBackend", "sandbox_name"]


class CapsemTerminalBackend:
    """One capsem sandbox per task_id.

    policy: the policy file for every sandbox (None: capsem's default,
    the AI providers' APIs only). secrets: credentials, as capsem's
    --secret ("ANTHROPIC_API_KEY", "MY_TOKEN@api.example.com"): the guest
    gets a placeholder, the value (this process's variable) goes only to
    the secret's hosts. env_allowlist: names of other host variables whose
    values the sandboxes get; nothing else of this process's environment
    enters them. A name there that looks like a credential's
    (capsem.credential_like) is refused, since its value would sit in the
    guest: pass it in secrets, or, knowing that, allow_credential_env=True.
    workspace: a host directory shared as /workspace (None: capsem's
    default, the current directory).
    """

    def __init__(self, policy=None, env_allowlist=(), workspace=None, data=None, ca_dir=None,
                 capsem_bin=None, default_timeout=None, cpus=None, memory=None, disk=None, secrets=(),
                 allow_credential_env=False):
        risky = [n for n in env_allowlist if capsem.credential_like(n)]
        if risky and not allow_credential_env:
            raise ValueError(f"env_allowlist names {', '.join(risky)}, which look like credentials: their values "
                             "would be in the guest, where a prompt-injected agent can send them anywhere the "
                             "policy allows. Pass them as secrets=[...] (the guest gets a placeholder), or "
                             "allow_credential_env=True if they are not credentials")
        self.policy = policy
        self.secrets = list(secrets)
        self.env_allowlist = tuple(env_allowlist)
        self.workspace = workspace
        self.data = data
        self.ca_dir = ca_dir
        self.capsem_bin = capsem_bin
        self.default_timeout = default_timeout
        self.size = {"cpus": cpus, "memory": memory, "disk": disk}
        self._sandboxes = {}

    def _env(self):
        return {k: os.environ[k] for k in self.env_allowlist if k in os.environ}

    def _sandbox(self, task_id):
        sb = self._sandboxes.get(task_id)
        if sb is not None:
            return sb
        name = sandbox_name(task_id)
        try:
            sb = capsem.Sandbox.start(name, policy=self.policy, workspace=self.workspace, env=self._env(),
                                      secrets=self.secrets,
                                      data=self.data, ca_dir=self.ca_dir, capsem=self.capsem_bin, **self.size)
        except capsem.AlreadyRunning:
            sb = capsem.Sandbox(name, data=self.data, capsem=self.capsem_bin)
        self._sandboxes[task_id] = sb
        return sb

    def run(self, command, task_id, timeout=None):
        """Runs command (a shell command line) in task_id's sandbox and
        returns {"output": stdout and stderr as the command wrote them,
        "exit_code": its code, 124 after the timeout}."""
        sb = self._sandbox(task_id)
        timeout = timeout if timeout is not None else self.default_timeout
        # One stream, in the order the command wrote it: stderr joins
        # stdout in the guest, before either reaches a pipe.
        r = sb.exec(["sh", "-c", "exec 2>&1; " + command], timeout=timeout)
        out = r.stdout.decode("utf-8", errors="replace")
        if r.truncated:
            out += f"\n[capsem: output cut at {capsem.MAX_BUFFERED >> 20} MiB]"
        if r.timed_out:
            out += f"\n[capsem: command timed out after {timeout} s]"
        elif r.error:
            out += f"\n[capsem: {r.error}]"
        return {"output": out, "exit_code": r.exit_code}

    def cleanup(self, task_id):
        """Removes task_id's sandbox and its disk (its record stays)."""
        self._sandboxes.pop(task_id, None)
        sb = capsem.Sandbox(sandbox_name(task_id), data=self.data, capsem=self.capsem_bin)
        try:
            sb.rm(force=True)
        except capsem.SandboxNotFound:
            pass


if __name__ == "__main__":
    backend = CapsemTerminalBackend()
    task = sys.argv[1] if len(sys.argv) > 1 else "demo"
    try:
        for line in sys.stdin:
            if line.strip():
                r = backend.run(line, task)
                print(r["output"], end="" if r["output"].endswith("\n") else "\n")
                print(f"[exit {r['exit_code']}]")
    finally:
        backend.cleanup(task)
