"""The package as pip installed it: what the suite imports is the venv's
copy, with its metadata, its type marker and its entry point."""

import importlib.metadata
import os
import pathlib

import pytest

import capsem


def test_installed_package():
    venv = os.environ.get("CAPSEM_SDK_VENV")
    if not venv:
        pytest.skip("not run from an installed package: go test ./tests -run TestPythonSDK installs it into a venv")
    here = pathlib.Path(capsem.__file__).resolve()
    assert str(here).startswith(str(pathlib.Path(venv).resolve())), f"capsem imported from {here}, not the venv"
    assert importlib.metadata.version("capsem") == capsem.__version__
    assert (here.parent / "py.typed").is_file(), "no py.typed: type checkers would ignore the hints"
    assert (here.parent / "integrations" / "hermes.py").is_file()
    eps = importlib.metadata.entry_points(group="hermes_agent.plugins")
    assert [(e.name, e.value) for e in eps] == [("capsem", "capsem.integrations.hermes")]


def test_credential_like():
    for name, why in [("ANTHROPIC_API_KEY", "a key"), ("GH_TOKEN", "a token"), ("DB_PASSWORD", "a password"),
                      ("AWS_SECRET_ACCESS_KEY", "a secret"), ("SENTRY_DSN", "a DSN holds a key"),
                      ("GOOGLE_APPLICATION_CREDENTIALS", "credentials"), ("OPENAI_APIKEY", "APIKEY as one word"),
                      ("GITHUB_PAT", "a personal access token")]:
        assert capsem.credential_like(name), why
    for name, why in [("HOME", "a path"), ("LANG", "a locale"), ("MONKEY_COUNT", "KEY inside a word"),
                      ("KEYBOARD", "KEY at a word's start"), ("AUTHOR", "AUTH inside a word"), ("PWD", "a directory")]:
        assert not capsem.credential_like(name), why
