"""Small end-to-end workflows an agent runs all day: text and JSON across
python, node and the shell, pipes, exit codes, signals, a 10 MB file."""

import hashlib
import json
import os
import signal

from conftest import describe, run

SAMPLE = {"name": "capsem", "n": 42, "pi": 3.25, "ok": True, "none": None, "list": [1, "two", {"three": 3}], "text": "héllo ✓"}


def test_text_write_read(out_dir):
    path = os.path.join(out_dir, "notes.txt")
    text = "line one\nünïcödé ✓\n\ttabbed\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    with open(path, encoding="utf-8") as f:
        assert f.read() == text


def test_json_round_trip_python(out_dir):
    path = os.path.join(out_dir, "a.json")
    with open(path, "w") as f:
        json.dump(SAMPLE, f)
    with open(path) as f:
        assert json.load(f) == SAMPLE


def test_json_round_trip_node(out_dir):
    path = os.path.join(out_dir, "a.json")
    js = "const fs=require('fs');const p=process.argv[1];fs.writeFileSync(p,JSON.stringify(JSON.parse(process.argv[2])));process.stdout.write(fs.readFileSync(p,'utf8'))"
    p = run(["node", "-e", js, path, json.dumps(SAMPLE)], timeout=30)
    assert p.returncode == 0, describe(p)
    assert json.loads(p.stdout) == SAMPLE


def test_json_python_to_node_to_python(out_dir):
    path = os.path.join(out_dir, "b.json")
    with open(path, "w") as f:
        json.dump(SAMPLE, f)
    js = "const fs=require('fs');const p=process.argv[1];const o=JSON.parse(fs.readFileSync(p,'utf8'));o.n+=1;o.list.push('node');fs.writeFileSync(p,JSON.stringify(o))"
    p = run(["node", "-e", js, path], timeout=30)
    assert p.returncode == 0, describe(p)
    with open(path) as f:
        got = json.load(f)
    assert got == dict(SAMPLE, n=43, list=SAMPLE["list"] + ["node"])


def test_json_through_jq_pipeline():
    p = run("""python3 -c 'import json; print(json.dumps([{"k": i, "v": i * i} for i in range(5)]))' | jq -c '[.[] | select(.v > 3) | .k]'""")
    assert p.stdout.strip() == "[2,3,4]", describe(p)


def test_shell_pipeline(out_dir):
    p = run("seq 1 1000 | awk '$1 % 7 == 0' | sort -rn | head -3 | tee top3 | paste -sd+ && awk '{s += $1} END {print s}' top3", cwd=out_dir)
    assert p.stdout.split() == ["994+987+980", "2961"], describe(p)


def test_pipefail_reports_the_failing_stage():
    p = run("set -o pipefail; false | cat; echo rc=$?")
    assert p.stdout.strip() == "rc=1", describe(p)


def test_exit_code_propagates():
    assert run("exit 3").returncode == 3
    assert run(["python3", "-c", "import sys; sys.exit(5)"]).returncode == 5


def test_stdin_reaches_the_command():
    p = run(["python3", "-c", "import sys; print(sys.stdin.read().upper())"], input="piped in")
    assert p.stdout.strip() == "PIPED IN", describe(p)


def test_signal_terminates_a_child():
    p = run("sleep 30 & pid=$!; kill -TERM $pid; wait $pid; echo rc=$?")
    assert p.stdout.strip() == f"rc={128 + signal.SIGTERM}", describe(p)


def test_background_jobs_and_wait(out_dir):
    p = run("for i in 1 2 3 4; do (echo $i > f$i) & done; wait; cat f1 f2 f3 f4 | paste -sd,", cwd=out_dir)
    assert p.stdout.strip() == "1,2,3,4", describe(p)


def test_10mb_file(out_dir):
    path = os.path.join(out_dir, "big.bin")
    data = os.urandom(10 * 1024 * 1024)
    with open(path, "wb") as f:
        f.write(data)
    want = hashlib.sha256(data).hexdigest()
    p = run(["sha256sum", path], timeout=30)
    assert p.stdout.split()[0] == want, describe(p)
    assert os.path.getsize(path) == len(data)


def test_tar_round_trip_of_a_tree(out_dir):
    script = """
set -e
mkdir -p src/a/b && echo 1 > src/a/one && echo 2 > src/a/b/two && ln -s one src/a/link
tar cJf tree.tar.xz src && mkdir dst && tar xJf tree.tar.xz -C dst
diff -r src dst/src && readlink dst/src/a/link
"""
    p = run(script, cwd=out_dir, timeout=30)
    assert p.returncode == 0 and p.stdout.strip() == "one", describe(p)
