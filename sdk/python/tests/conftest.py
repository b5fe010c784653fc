"""Fixtures for the client's tests: real sandboxes under QEMU, started with
the capsem binary in $CAPSEM_BIN (tests/python_sdk_test.go builds it and
runs this suite), in a throwaway data directory and CA; every sandbox made
is removed at the end. The capsem package is the one installed (go test
./tests -run TestPythonSDK installs it into a venv and runs this suite from
there), or sdk/python on PYTHONPATH."""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import capsem  # noqa: E402


@pytest.fixture(scope="session")
def capsem_bin():
    b = os.environ.get("CAPSEM_BIN") or shutil.which("capsem")
    if not b:
        pytest.skip("no capsem binary: set CAPSEM_BIN (go test ./tests -run TestPythonSDK does)")
    return b


@pytest.fixture(scope="session")
def env(capsem_bin):
    """A data directory, a CA directory and a workspace for the session's
    sandboxes; removes every sandbox left in it at the end."""
    root = tempfile.mkdtemp(prefix="capsem-sdk-")
    e = {
        "data": os.path.join(root, "data"),
        "ca_dir": os.path.join(root, "ca"),
        "workspace": os.path.join(root, "ws"),
        "capsem": capsem_bin,
    }
    os.makedirs(e["workspace"])
    yield e
    try:
        for s in capsem.ls(data=e["data"], capsem=capsem_bin):
            subprocess.run([capsem_bin, "rm", "--force", "--data", e["data"], s["name"]], capture_output=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def sb(env):
    """One sandbox for a module's tests."""
    s = capsem.Sandbox.start("sdk-shared", workspace=env["workspace"], data=env["data"], ca_dir=env["ca_dir"],
                             capsem=env["capsem"], env={"FROM_START": "yes"})
    yield s
    s.rm(force=True)
