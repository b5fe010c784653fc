"""The shared workspace: mounted at /workspace, read and written from both
sides (the host's view comes from the doctor's upstream), large files,
subdirectories, deletes, and file events that reach the host's store."""

import hashlib
import mmap
import os
import uuid

import pytest

from conftest import WORKSPACE, fs_events, mount_at, needs_doctor_guest, wait_for, workspace_file_on_host

HOST_FILE = "host-file.txt"
HOST_FILE_CONTENT = "written by the host\n"


def write(path, data):
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(path, mode) as f:
        f.write(data)


def test_workspace_is_mounted_read_write():
    m = mount_at(WORKSPACE)
    assert m is not None, "/workspace is not a mount"
    assert "rw" in m[3], sorted(m[3])


def test_host_file_is_visible_in_guest():
    needs_doctor_guest("the file the doctor writes into its workspace")
    with open(os.path.join(WORKSPACE, HOST_FILE)) as f:
        assert f.read() == HOST_FILE_CONTENT


def test_host_sees_its_own_file(doctor_host):
    assert workspace_file_on_host(doctor_host, HOST_FILE) == (200, HOST_FILE_CONTENT.encode())


def test_guest_write_is_visible_to_host(doctor_host, ws_dir):
    path, rel = ws_dir
    write(os.path.join(path, "note.txt"), "from the guest\n")
    assert workspace_file_on_host(doctor_host, f"{rel}/note.txt") == (200, b"from the guest\n")


def test_guest_append_is_visible_to_host(doctor_host, ws_dir):
    path, rel = ws_dir
    f = os.path.join(path, "log.txt")
    write(f, "one\n")
    with open(f, "a") as fh:
        fh.write("two\n")
    assert workspace_file_on_host(doctor_host, f"{rel}/log.txt") == (200, b"one\ntwo\n")


def test_large_file_round_trip(doctor_host, ws_dir):
    path, rel = ws_dir
    data = os.urandom(10 * 1024 * 1024)
    write(os.path.join(path, "big.bin"), data)
    with open(os.path.join(path, "big.bin"), "rb") as f:
        assert hashlib.sha256(f.read()).digest() == hashlib.sha256(data).digest()
    status, body = workspace_file_on_host(doctor_host, f"{rel}/big.bin")
    assert status == 200 and len(body) == len(data)
    assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest(), "the host sees other bytes"


def test_subdirectory_is_visible_to_host(doctor_host, ws_dir):
    path, rel = ws_dir
    os.makedirs(os.path.join(path, "a", "b", "c"))
    write(os.path.join(path, "a", "b", "c", "deep.txt"), "deep")
    assert workspace_file_on_host(doctor_host, f"{rel}/a/b/c/deep.txt") == (200, b"deep")


def test_delete_and_recreate(doctor_host, ws_dir):
    path, rel = ws_dir
    f = os.path.join(path, "phoenix.txt")
    write(f, "first")
    assert workspace_file_on_host(doctor_host, f"{rel}/phoenix.txt") == (200, b"first")
    os.unlink(f)
    assert not os.path.exists(f)
    assert workspace_file_on_host(doctor_host, f"{rel}/phoenix.txt")[0] == 404
    write(f, "second")
    assert workspace_file_on_host(doctor_host, f"{rel}/phoenix.txt") == (200, b"second")


def test_rename_is_visible_to_host(doctor_host, ws_dir):
    path, rel = ws_dir
    write(os.path.join(path, "old.txt"), "moved")
    os.rename(os.path.join(path, "old.txt"), os.path.join(path, "new.txt"))
    assert workspace_file_on_host(doctor_host, f"{rel}/new.txt") == (200, b"moved")
    assert workspace_file_on_host(doctor_host, f"{rel}/old.txt")[0] == 404


def test_shared_writable_mmap(ws_dir):
    path, _ = ws_dir
    f = os.path.join(path, "mapped.bin")
    write(f, b"\0" * 4096)
    with open(f, "r+b") as fh:
        m = mmap.mmap(fh.fileno(), 4096)
        m[:6] = b"mapped"
        m.flush()
        m.close()
    with open(f, "rb") as fh:
        assert fh.read(6) == b"mapped"


def test_chmod_is_kept(ws_dir):
    path, _ = ws_dir
    f = os.path.join(path, "script.sh")
    write(f, "#!/bin/sh\necho ran\n")
    os.chmod(f, 0o755)
    assert os.stat(f).st_mode & 0o777 == 0o755


def events_for(host, rel, action):
    return [e for e in fs_events(host) if e.get("path") == rel and e.get("action") == action]


@pytest.mark.parametrize("action", ["created", "modified", "deleted"])
def test_file_event_reaches_host_store(doctor_host, ws_dir, action):
    path, rel = ws_dir
    name = f"event-{uuid.uuid4().hex[:8]}.txt"
    f, frel = os.path.join(path, name), f"{rel}/{name}"
    write(f, "v1")
    if action != "created":
        # Let the creation be reported first, or it is coalesced with what follows.
        assert wait_for(lambda: events_for(doctor_host, frel, "created")), f"no created event for {frel}"
        if action == "modified":
            with open(f, "a") as fh:
                fh.write("v2")
        else:
            os.unlink(f)
    got = wait_for(lambda: events_for(doctor_host, frel, action))
    assert got, f"no {action} event for {frel}; the host has: {fs_events(doctor_host)[-10:]}"
