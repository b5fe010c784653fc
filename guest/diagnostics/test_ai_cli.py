"""The agent CLIs: installed from their pinned npm packages, and able to
start (--version) with no network at all."""

import json
import os
import re
import shutil

import pytest

from conftest import describe, run

# command: its npm package, installed globally under /usr/local.
CLIS = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
}
NODE_MODULES = "/usr/local/lib/node_modules"


_versions = {}


def cli_version(cli):
    """`cli --version`, run once per CLI (gemini takes ~10 s under TCG)."""
    if cli not in _versions:
        _versions[cli] = run([cli, "--version"], timeout=90)
    return _versions[cli]


def package_version(pkg):
    with open(os.path.join(NODE_MODULES, pkg, "package.json")) as f:
        return json.load(f)["version"]


@pytest.mark.parametrize("cli", sorted(CLIS))
def test_cli_is_installed(cli):
    path = shutil.which(cli)
    assert path, f"{cli} is not on PATH"
    target = os.path.realpath(path)
    assert target.startswith(os.path.join(NODE_MODULES, CLIS[cli]) + "/"), f"{cli} -> {target}"
    assert os.access(target, os.X_OK), f"{target} is not executable"


@pytest.mark.parametrize("cli", sorted(CLIS))
def test_cli_version_works_offline(cli):
    # No network reaches these CLIs' vendors (the doctor's policy allows
    # none of them): --version must not need it.
    p = cli_version(cli)
    assert p.returncode == 0, describe(p)
    assert re.search(r"\d+\.\d+\.\d+", p.stdout), describe(p)


@pytest.mark.parametrize("cli", sorted(CLIS))
def test_cli_version_is_the_installed_package(cli):
    p = cli_version(cli)
    assert p.returncode == 0, describe(p)
    assert package_version(CLIS[cli]) in p.stdout, f"{cli} --version says {p.stdout.strip()!r}, package.json {package_version(CLIS[cli])}"
