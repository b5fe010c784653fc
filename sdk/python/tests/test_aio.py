"""capsem.aio, the asyncio client, against real sandboxes: the blocking
client's operations as coroutines, secrets as placeholders, typed errors."""

import asyncio
import io
import os

import pytest

import capsem
from capsem import aio


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 300))


def test_exec(sb):
    async def main():
        a = aio.Sandbox(sb.name, data=sb.data, capsem=sb.capsem)
        r = await a.exec(["sh", "-c", "echo out; echo err >&2; exit 42"])
        assert (r.exit_code, r.stdout, r.stderr) == (42, b"out\n", b"err\n")
        assert (await a.exec(["cat"], stdin=b"to the guest")).stdout == b"to the guest"
        r = await a.exec(["sleep", "60"], timeout=1)
        assert r.exit_code == capsem.EXIT_TIMEOUT and r.timed_out
        assert (await a.exec(["no-such-command"])).exit_code == 127
        # Two commands at once on one loop: nothing blocks it.
        r1, r2 = await asyncio.gather(a.exec("sleep 1; echo a"), a.exec("sleep 1; echo b"))
        assert (r1.stdout, r2.stdout) == (b"a\n", b"b\n")
        async with await a.exec_stream(["sh", "-c", "read x; echo got $x; echo e >&2"]) as s:
            await s.send_stdin(b"line\n")
            await s.close_stdin()
            chunks = [c async for c in s]
        assert ("stdout", b"got line\n") in chunks and ("stderr", b"e\n") in chunks
        assert s.exit["exit_code"] == 0
        assert (await a.status())["name"] == sb.name
    run(main())


def test_files(sb):
    async def main():
        a = aio.Sandbox(sb.name, data=sb.data, capsem=sb.capsem)
        data = os.urandom((3 << 20) + 5)
        assert (await a.put_file("/root/aio/a.bin", data))["size"] == len(data)
        assert await a.get_file("/root/aio/a.bin") == data

        async def parts():
            for i in range(0, len(data), 1 << 20):
                yield data[i : i + (1 << 20)]
        assert (await a.put_file("/root/aio/b.bin", parts(), mode=0o600))["size"] == len(data)
        out = io.BytesIO()
        assert await a.get_file("/root/aio/b.bin", out) == len(data) and out.getvalue() == data
        assert (await a.exec(["stat", "-c", "%a", "/root/aio/b.bin"])).stdout == b"600\n"
        with pytest.raises(capsem.APIError) as e:
            await a.get_file("/root/aio/none")
        assert e.value.status == 404
    run(main())


def test_events_and_asks(sb):
    async def main():
        a = aio.Sandbox(sb.name, data=sb.data, capsem=sb.capsem)
        await a.exec(["echo", "aio-event-marker"])
        rows = [ev async for ev in a.events(since=0)]
        assert any(ev["table"] == "exec_events" and "aio-event-marker" in str(ev.get("argv")) for ev in rows)
        assert await a.asks() == []
    run(main())


def test_lifecycle_and_secret(env, monkeypatch):
    real = "sk-ant-api03-" + "aio0" * 12
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    async def main():
        # A value given, not in this process's environment: passed to
        # capsem in its environment; the guest holds the placeholder.
        a = await aio.Sandbox.start("sdk-aio", workspace=env["workspace"], data=env["data"], ca_dir=env["ca_dir"],
                                    capsem=env["capsem"], secrets={"ANTHROPIC_API_KEY": real})
        try:
            out = (await a.exec(["sh", "-c", "echo $ANTHROPIC_API_KEY"])).stdout.decode()
            assert out.startswith("capsem-secret-") and real not in out
            with pytest.raises(capsem.AlreadyRunning):
                await aio.Sandbox.start("sdk-aio", data=env["data"], capsem=env["capsem"])
            await a.stop()
            with pytest.raises(capsem.SandboxNotRunning):
                await a.exec(["true"])
            assert {s["name"]: s["state"] for s in await aio.ls(env["data"], env["capsem"])}["sdk-aio"] == "stopped"
        finally:
            await a.rm(force=True)
        with pytest.raises(capsem.SandboxNotFound):
            await a.exec(["true"])
        with pytest.raises(capsem.SandboxNotFound):
            await a.rm()
    run(main())
