"""The terminal-backend example against real sandboxes: one per task,
state kept within a task and apart between tasks, output in the order it
was written, the host environment only from the allowlist, timeouts as
124, cleanup."""

import os
import re

import pytest

import capsem
from terminal_backend import CapsemTerminalBackend, sandbox_name


def test_terminal_backend(env, monkeypatch):
    monkeypatch.setenv("ALLOWED_VAR", "passed")
    monkeypatch.setenv("SECRET_VAR", "must-not-pass")
    b = CapsemTerminalBackend(env_allowlist=["ALLOWED_VAR", "ABSENT_VAR"], workspace=env["workspace"],
                              data=env["data"], ca_dir=env["ca_dir"], capsem_bin=env["capsem"])
    try:
        r = b.run("echo one; echo two >&2; echo three; exit 3", task_id="Task A/1")
        assert r == {"output": "one\ntwo\nthree\n", "exit_code": 3}
        b.run("echo kept > /root/note", task_id="Task A/1")
        assert b.run("cat /root/note", task_id="Task A/1")["output"] == "kept\n"
        assert b.run("cat /root/note", task_id="task-b")["exit_code"] != 0, "tasks share a sandbox"
        out = b.run("env", task_id="task-b")["output"]
        assert "ALLOWED_VAR=passed" in out
        assert "SECRET_VAR" not in out and "must-not-pass" not in out
        r = b.run("sleep 60", task_id="task-b", timeout=1)
        assert r["exit_code"] == 124 and "timed out" in r["output"]
        names = {s["name"] for s in capsem.ls(data=env["data"], capsem=env["capsem"])}
        assert {sandbox_name("Task A/1"), sandbox_name("task-b")} <= names
    finally:
        b.cleanup("Task A/1")
        b.cleanup("task-b")
    names = {s["name"] for s in capsem.ls(data=env["data"], capsem=env["capsem"])}
    assert sandbox_name("Task A/1") not in names and sandbox_name("task-b") not in names
    assert not os.path.exists(os.path.join(env["data"], "sandboxes", sandbox_name("task-b")))


def test_sandbox_names():
    assert sandbox_name("build-7") == "task-build-7"  # already a name: kept, readable
    a, b = sandbox_name("Task A/1"), sandbox_name("task a 1")
    assert a != b and a.startswith("task-task-a-1-")  # changed: a hash keeps ids apart
    for tid in ("X" * 500, "///", "ü-é", "a" * 58, "a" * 59, "-lead"):
        n = sandbox_name(tid)
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", n), (tid, n)
    assert sandbox_name("a" * 58) == "task-" + "a" * 58
    assert sandbox_name("a" * 59) != sandbox_name("a" * 60)


def test_terminal_backend_secret(env, monkeypatch):
    """The example's credential is a secret: every process in its sandbox
    holds the placeholder, none the real value; an allowlist naming it is
    refused."""
    real = "sk-ant-api03-" + "R3alValue" * 6
    monkeypatch.setenv("ANTHROPIC_API_KEY", real)
    kw = dict(workspace=env["workspace"], data=env["data"], ca_dir=env["ca_dir"], capsem_bin=env["capsem"])
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        CapsemTerminalBackend(env_allowlist=["ANTHROPIC_API_KEY"], **kw)
    b = CapsemTerminalBackend(secrets=["ANTHROPIC_API_KEY"], **kw)
    try:
        assert b.run("sleep 600 >/dev/null 2>&1 &", task_id="secret")["exit_code"] == 0  # a process that stays
        out = b.run("for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; echo; done 2>/dev/null; "
                    "ls -d /proc/[0-9]* | wc -l", task_id="secret")["output"]
        assert real not in out and real[13:] not in out, "the real key is in a guest process's environment"
        held = [line for line in out.splitlines() if line.startswith("ANTHROPIC_API_KEY=")]
        assert len(held) >= 2, out[-2000:]  # the background sleep and the shell reading
        assert all(line.startswith("ANTHROPIC_API_KEY=capsem-secret-") for line in held), held
        assert int(out.splitlines()[-1]) > 10  # every process was there to be read
        assert real not in b.run("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '", task_id="secret")["output"]
    finally:
        b.cleanup("secret")
