"""Snapshots from Python: snapshot() saves the running guest, snapshots()
lists it, fork() starts a new sandbox from it that has what the guest had
then and not what it did after, suspend() and Sandbox.start() resume a
process; remove_snapshot() removes one."""

import capsem


def test_snapshot_fork_suspend(sb, env):
    sb.exec("cd /root && echo before > /root/mark && (setsid sleep 600 </dev/null >/dev/null 2>&1 &)")
    rec = sb.snapshot(tag="py1")
    assert rec["tag"] == "py1" and rec["bytes"] > 0 and rec["paused_ms"] > 0, rec
    assert [s["tag"] for s in sb.snapshots()] == ["py1"]
    sb.exec("echo after > /root/after")

    fork = sb.fork("sdk-fork", tag="py1", ca_dir=env["ca_dir"])
    try:
        assert isinstance(fork, capsem.Sandbox) and fork.name == "sdk-fork"
        r = fork.exec("cat /root/mark; ls /root/after 2>&1; pgrep -x sleep >/dev/null && echo sleeping")
        out = r.stdout.decode()
        assert out.startswith("before\n") and "No such file" in out and "sleeping" in out, out
        assert fork.status()["session_id"] != sb.status()["session_id"]

        fork.suspend()
        assert next(s for s in capsem.ls(data=env["data"], capsem=env["capsem"]) if s["name"] == "sdk-fork")["state"] == "suspended"
        capsem.Sandbox.start("sdk-fork", data=env["data"], ca_dir=env["ca_dir"], capsem=env["capsem"])
        assert fork.exec("pgrep -x sleep >/dev/null && echo sleeping").stdout == b"sleeping\n"
    finally:
        fork.rm(force=True)
    sb.remove_snapshot("py1")
    assert sb.snapshots() == []
