"""The hermes-agent backend (capsem.integrations.hermes) against real
sandboxes, held to what hermes-agent's own tests ask of an environment
(tests/tools/test_base_environment.py, test_ssh_environment.py,
test_daytona_environment.py at its commit 82b49660): {"output",
"returncode"}; exit codes as the command gave them; stderr in the output;
cwd and exported variables carried to the next command; 124 and the
timeout notice after a timeout, the next command working; 126 for a cwd
that cannot be entered; all 1000 lines of seq 1 1000; stdin; an idempotent
cleanup."""

import sys
import types

import pytest

import capsem
from capsem.integrations import hermes


@pytest.fixture(scope="module")
def henv(env):
    e = hermes.CapsemEnvironment(cwd="/root", timeout=60, env={"FROM_HERMES": "1"}, task_id="t/1",
                                 workspace=env["workspace"], data=env["data"], ca_dir=env["ca_dir"],
                                 capsem=env["capsem"], persistent=False)
    yield e
    e.cleanup()


def test_output_and_codes(henv):
    r = henv.execute("echo hello")
    assert r == {"output": "hello\n", "returncode": 0}
    assert henv.execute("exit 42")["returncode"] == 42
    r = henv.execute("no-such-command-x")
    assert r["returncode"] == 127 and "no-such-command-x" in r["output"]
    assert henv.execute("echo one; echo two >&2; echo three")["output"] == "one\ntwo\nthree\n"
    assert henv.execute("printf 'a\\nb\\n\\nc'")["output"] == "a\nb\n\nc"
    out = henv.execute("seq 1 1000")["output"]
    assert out.splitlines() == [str(i) for i in range(1, 1001)]
    assert henv.execute("echo $FROM_HERMES")["output"] == "1\n"


def test_cwd_and_exports_persist(henv):
    assert henv.execute("cd /tmp")["returncode"] == 0
    assert henv.execute("pwd")["output"] == "/tmp\n" and henv.cwd == "/tmp"
    henv.execute("export KEPT=across; LOCAL=no")
    assert henv.execute('echo "$KEPT-$LOCAL"')["output"] == "across-\n"
    assert henv.execute("pwd", cwd="/etc")["output"] == "/etc\n"  # a cwd given wins for that command…
    assert henv.execute("pwd")["output"] == "/etc\n"  # …and is where it ended
    r = henv.execute("pwd", cwd="/no/such/dir")
    assert r["returncode"] == hermes.EXIT_NO_CWD
    assert henv.execute("cd ~ && pwd")["output"] == "/root\n"
    assert henv.execute("mkdir -p '/tmp/my dir' && cd '/tmp/my dir' && pwd")["output"] == "/tmp/my dir\n"
    assert henv.execute("pwd")["output"] == "/tmp/my dir\n"


def test_timeout_then_next_works(henv):
    r = henv.execute("echo started; sleep 999", timeout=2)
    assert r["returncode"] == 124
    assert r["output"] == "started\n\n[Command timed out after 2s]"  # partial + "\n[Command timed out after Ns]"
    assert henv.execute("echo after")["output"] == "after\n"


def test_stdin(henv):
    assert henv.execute("cat", stdin_data="to stdin\n")["output"] == "to stdin\n"
    assert henv.execute("wc -l", stdin_data="a\nb\n")["output"].strip() == "2"


def test_persistent_cleanup_keeps_the_disk(env):
    kw = dict(workspace=env["workspace"], data=env["data"], ca_dir=env["ca_dir"], capsem=env["capsem"])
    e = hermes.CapsemEnvironment(task_id="keep", **kw)
    assert e.execute("echo kept > /root/note")["returncode"] == 0
    e.cleanup()
    e.cleanup()  # idempotent
    states = {s["name"]: s["state"] for s in capsem.ls(env["data"], env["capsem"])}
    assert states[e.name] == "stopped"
    e2 = hermes.CapsemEnvironment(task_id="keep", **kw)
    assert e2.execute("cat /root/note")["output"] == "kept\n"
    e3 = hermes.CapsemEnvironment(task_id="keep", **kw)  # the task's sandbox already runs: attached
    assert e3.execute("cat /root/note")["output"] == "kept\n"
    capsem.Sandbox(e2.name, data=env["data"], capsem=env["capsem"]).stop()  # behind its back
    assert e2.execute("echo again")["output"] == "again\n", "a stopped sandbox is started again"
    e2.cleanup(force_remove=True)
    assert e2.name not in {s["name"] for s in capsem.ls(env["data"], env["capsem"])}


def test_credentials_are_secrets(env):
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        hermes.CapsemEnvironment(env={"ANTHROPIC_API_KEY": "sk-ant-x"}, task_id="x", capsem=env["capsem"])
    e = hermes.CapsemEnvironment(env={"DB_PASSWORD": "not-secret"}, allow_credential_env=True, task_id="x",
                                 capsem=env["capsem"])
    e.cleanup()  # never started: nothing to do


def test_half_built_cleanup():
    e = hermes.CapsemEnvironment.__new__(hermes.CapsemEnvironment)
    with pytest.raises(AttributeError):
        e.cleanup()  # hermes calls cleanup from __del__, which swallows this
    e.__del__()


def test_factory_and_registration(env, monkeypatch):
    req = types.SimpleNamespace(name="capsem", task_id="Task 9", cwd="/workspace", timeout=30, image="",
                                settings={"policy": "/p.toml", "secrets": ["ANTHROPIC_API_KEY"], "persistent": False,
                                          "capsem": env["capsem"]})
    e = hermes.backend_factory(req)
    assert (e.cwd, e.timeout, e.persistent, e.name) == ("/workspace", 30, False, capsem.naming.sandbox_name("Task 9", "hermes-"))
    assert e._start["secrets"] == ["ANTHROPIC_API_KEY"] and e._start["policy"] == "/p.toml"
    req.settings = {"image": "debian"}
    with pytest.raises(ValueError, match="unknown image"):
        hermes.backend_factory(req)

    # register(ctx) against the registry's shape (its module is hermes-agent's;
    # this stands in for it to check the call capsem makes).
    registry = types.ModuleType("tools.environments.registry")

    class TerminalBackendDefinition:
        def __init__(self, name, factory, **kw):
            self.name, self.factory, self.kw = name, factory, kw

    registry.TerminalBackendDefinition = TerminalBackendDefinition
    for mod in ("tools", "tools.environments"):
        monkeypatch.setitem(sys.modules, mod, types.ModuleType(mod))
    monkeypatch.setitem(sys.modules, "tools.environments.registry", registry)
    got = []
    hermes.register(types.SimpleNamespace(register_terminal_backend=got.append))
    assert len(got) == 1 and got[0].name == "capsem" and got[0].factory is hermes.backend_factory
