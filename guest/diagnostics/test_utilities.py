"""Everyday unix tools: each one present and doing its job (not only
printing a version), offline, in a scratch directory."""

import shutil

import pytest

from conftest import GATEWAY, describe, needs_doctor_guest, run

ABC_SHA256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

# (tool, shell snippet run in a fresh directory, text its stdout must contain)
TOOLS = [
    ("bash", "echo $((6 * 7)) ${BASH_VERSINFO[0]}", "42 5"),
    ("sh", "sh -c 'x=ab; echo ${#x}'", "2"),
    ("ls", "touch b a && ls", "a\nb"),
    ("cat", "printf 'x\\ny\\n' > f && cat -n f", "2\ty"),
    ("cp", "echo data > a && cp a b && cat b", "data"),
    ("mv", "echo data > a && mv a b && ls && cat b", "b\ndata"),
    ("rm", "touch a b && rm a && ls", "b"),
    ("mkdir", "mkdir -p x/y/z && cd x/y/z && pwd", "/x/y/z"),
    ("ln", "echo t > a && ln -s a l && readlink l && cat l", "a\nt"),
    ("chmod", "touch f && chmod 750 f && stat -c %a f", "750"),
    ("touch", "touch -d '2001-02-03 04:05:06' f && date -r f +%Y%m%d", "20010203"),
    ("head", "seq 100 | head -n 3 | tr '\\n' ,", "1,2,3,"),
    ("tail", "seq 100 | tail -n 2 | tr '\\n' ,", "99,100,"),
    ("wc", "printf 'a b\\nc\\n' | wc -lw", "2       3"),
    ("sort", "printf 'b\\n10\\na\\n2\\n' | sort | tr '\\n' ,", "10,2,a,b,"),
    ("uniq", "printf 'a\\na\\nb\\n' | uniq -c | awk '{print $1 $2}' | tr '\\n' ,", "2a,1b,"),
    ("cut", "echo a:b:c | cut -d: -f2", "b"),
    ("tr", "echo hello | tr a-z A-Z", "HELLO"),
    ("sed", "echo hello world | sed -E 's/(o) w/\\1_W/'", "hello_World"),
    ("awk", "printf '1 2\\n3 4\\n' | awk '{s += $2} END {print s}'", "6"),
    ("grep", "printf 'foo\\nbar\\nbaz\\n' | grep -c '^ba'", "2"),
    ("find", "mkdir -p d/e && touch d/e/f.txt d/g && find d -name '*.txt'", "d/e/f.txt"),
    ("xargs", "printf 'a\\nb\\n' | xargs echo x", "x a b"),
    ("tee", "echo t | tee f > /dev/null && cat f", "t"),
    ("diff", "printf 'a\\n' > x && printf 'b\\n' > y; diff x y; echo rc=$?", "> b\nrc=1"),
    ("patch", "printf 'a\\n' > x && printf 'b\\n' > y; diff -u x y > p.diff; patch -s x < p.diff && cat x", "b"),
    ("tar", "mkdir t && echo hi > t/f && tar czf t.tgz t && rm -r t && tar xzf t.tgz && cat t/f", "hi"),
    ("gzip", "echo zipped | gzip -9 | gzip -d", "zipped"),
    ("xz", "echo squeezed | xz | xz -d", "squeezed"),
    ("unzip", "python3 -c \"import zipfile; z = zipfile.ZipFile('z.zip', 'w'); z.writestr('f', 'unzipped'); z.close()\" && unzip -p z.zip f", "unzipped"),
    ("sha256sum", "printf abc | sha256sum", ABC_SHA256),
    ("md5sum", "printf abc | md5sum", "900150983cd24fb0d6963f7d28e17f72"),
    ("base64", "printf capsem | base64 && printf Y2Fwc2Vt | base64 -d", "Y2Fwc2Vt\ncapsem"),
    ("jq", "echo '{\"a\": [1, 2, 3]}' | jq -c '{sum: (.a | add)}'", '{"sum":6}'),
    ("rg", "printf 'foo\\nbar\\n' > t && rg -n bar t", "2:bar"),
    ("less", "echo paged | less -FX", "paged"),
    ("ps", "sleep 5 & ps -o comm= -p $!; kill $!", "sleep"),
    ("pgrep", "pgrep -x init", "1"),
    ("free", "free -m", "Mem:"),
    ("df", "df -P /tmp | tail -1 | awk '{print $1}'", "tmpfs"),
    ("du", "head -c 100000 /dev/zero > f && du -b f", "100000"),
    ("stat", "printf 12345 > f && stat -c %s f", "5"),
    ("date", "date -u -d @0 +%Y-%m-%d", "1970-01-01"),
    ("timeout", "timeout 0.2 sleep 5; echo rc=$?", "rc=124"),
    ("env", "env -i FOO=bar env", "FOO=bar"),
    ("mktemp", "d=$(mktemp -d) && test -d $d && echo made && rmdir $d", "made"),
    ("which", "which bash", "/bin/bash"),
    ("uname", "uname -sm", "Linux"),
    ("id", "id -u", "0"),
    ("perl", "perl -e 'print join(\",\", map { $_ * 2 } 1..3)'", "2,4,6"),
    ("openssl", "printf abc | openssl dgst -sha256", ABC_SHA256),
    ("curl", "echo local > f && curl -sS file://$PWD/f", "local"),
    ("ip", "ip -o -4 addr show dev eth0", "198.18.0.2/24"),
    ("ss", "ss -tn state established | head -1", "Recv-Q"),
    ("dig", "dig +short +time=3 +tries=1 $CAPSEM_DOCTOR_HOST", "198.19."),
    ("ping", f"ping -c 1 -W 5 {GATEWAY}", "1 received"),
    # The server stays up for every attempt (not -1): under a loaded TCG
    # host one client run can fail after connecting, and a one-shot server
    # would then be gone for the retry.
    ("iperf3", "iperf3 -s -p 5299 > /dev/null 2>&1 & S=$!; for i in $(seq 100); do iperf3 -c 127.0.0.1 -p 5299 -n 1M -J > r.json 2> /dev/null && jq -e .end.sum_sent.bytes r.json > /dev/null && break; sleep 0.1; done; kill $S; jq .end.sum_sent.bytes r.json", ""),
]


@pytest.mark.parametrize("tool,script,want", TOOLS, ids=[t[0] for t in TOOLS])
def test_tool_works(tool, script, want, out_dir):
    if "CAPSEM_DOCTOR_HOST" in script:
        needs_doctor_guest("CAPSEM_DOCTOR_HOST (a name the doctor's policy allows)")
    assert shutil.which(tool), f"{tool} is not installed"
    p = run(script, cwd=out_dir, timeout=30)
    assert want in p.stdout, f"{tool}: want {want!r} in the output\n" + describe(p)
    if tool == "iperf3":
        assert int(p.stdout.strip()) >= 1 << 20, describe(p)

