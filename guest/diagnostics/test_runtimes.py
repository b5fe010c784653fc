"""The language runtimes and git an agent relies on: present at the expected
versions, and doing real work (file I/O, a git history), offline."""

import json
import os
import re

from conftest import describe, run


def version(text):
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    assert m, f"no version in {text!r}"
    return tuple(int(x or 0) for x in m.groups())


def test_python3_version():
    p = run(["python3", "--version"])
    assert p.returncode == 0, describe(p)
    assert version(p.stdout) >= (3, 11), p.stdout


def test_pip_version():
    p = run(["python3", "-m", "pip", "--version"], timeout=30)
    assert p.returncode == 0, describe(p)
    assert version(p.stdout) >= (23, 0), p.stdout


def test_pytest_version():
    import pytest

    assert version(pytest.__version__) >= (7, 0)


def test_python_venv_module_works(out_dir):
    p = run(["python3", "-m", "venv", "--without-pip", os.path.join(out_dir, "venv")], timeout=60)
    assert p.returncode == 0, describe(p)
    p = run([os.path.join(out_dir, "venv", "bin", "python"), "-c", "import sys; print(sys.prefix)"])
    assert p.stdout.strip() == os.path.join(out_dir, "venv"), describe(p)


def test_python_stdlib_sqlite3():
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.execute("create table t (x)")
    db.executemany("insert into t values (?)", [(i,) for i in range(10)])
    assert db.execute("select sum(x) from t").fetchone() == (45,)


def test_node_version_22():
    p = run(["node", "--version"], timeout=30)
    assert p.returncode == 0, describe(p)
    assert version(p.stdout)[0] == 22, p.stdout


def test_npm_version():
    p = run(["npm", "--version"], timeout=60)
    assert p.returncode == 0, describe(p)
    assert version(p.stdout) >= (9, 0), p.stdout


def test_git_version():
    p = run(["git", "--version"])
    assert p.returncode == 0, describe(p)
    assert version(p.stdout) >= (2, 30), p.stdout


def test_python_file_io(out_dir):
    path = os.path.join(out_dir, "data.bin")
    data = os.urandom(1 << 20)
    with open(path, "wb") as f:
        f.write(data)
    with open(path, "ab") as f:
        f.write(b"tail")
    with open(path, "rb") as f:
        assert f.read() == data + b"tail"
    os.rename(path, path + ".moved")
    assert os.listdir(out_dir) == ["data.bin.moved"]


def test_node_file_io(out_dir):
    js = r"""
const fs = require('fs'), path = require('path');
const d = process.argv[1];
fs.mkdirSync(path.join(d, 'sub'));
fs.writeFileSync(path.join(d, 'sub', 'a.txt'), 'héllo\n');
fs.appendFileSync(path.join(d, 'sub', 'a.txt'), 'world\n');
fs.renameSync(path.join(d, 'sub', 'a.txt'), path.join(d, 'sub', 'b.txt'));
console.log(JSON.stringify({files: fs.readdirSync(path.join(d, 'sub')), text: fs.readFileSync(path.join(d, 'sub', 'b.txt'), 'utf8')}));
"""
    p = run(["node", "-e", js, out_dir], timeout=30)
    assert p.returncode == 0, describe(p)
    assert json.loads(p.stdout) == {"files": ["b.txt"], "text": "héllo\nworld\n"}


def test_node_crypto_and_zlib():
    js = "const c=require('crypto'),z=require('zlib');const b=z.gunzipSync(z.gzipSync(Buffer.from('abc')));console.log(c.createHash('sha256').update(b).digest('hex'))"
    p = run(["node", "-e", js], timeout=30)
    assert p.stdout.strip() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", describe(p)


def test_git_init_commit_workflow(out_dir):
    script = """
set -e
git init -q -b main repo && cd repo
git config user.email doctor@capsem.test && git config user.name 'capsem doctor'
printf 'one\\n' > f.txt && git add f.txt && git commit -q -m first
git checkout -q -b feature && printf 'two\\n' >> f.txt && git commit -q -am second
git checkout -q main && git merge -q --ff-only feature
git log --format=%s | tr '\\n' ' '; echo
git diff HEAD~1 --stat | tail -1
git status --porcelain | wc -l
"""
    p = run(script, cwd=out_dir, timeout=30)
    assert p.returncode == 0, describe(p)
    lines = p.stdout.splitlines()
    assert lines[0].strip() == "second first", lines
    assert "1 insertion" in lines[1], lines
    assert lines[2].strip() == "0", lines


def test_git_clone_of_a_local_repository(out_dir):
    script = """
set -e
git init -q -b main src && cd src && git -c user.email=d@c.test -c user.name=d commit -q --allow-empty -m root && cd ..
git clone -q src dst && git -C dst log --format=%s
"""
    p = run(script, cwd=out_dir, timeout=30)
    assert p.returncode == 0 and p.stdout.strip() == "root", describe(p)

