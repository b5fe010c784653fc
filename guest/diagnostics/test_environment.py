"""The environment a command finds: variables, shell, kernel, OS, mounts;
and nothing of the host's environment but what capsem passes on purpose."""

import os
import platform
import pwd
import re
import time

import pytest

from conftest import WORKSPACE, describe, mount_at, run

# Variables the guest environment may hold: what the agent sets, what the
# host passes on purpose (TERM, LANG, TZ, --env CAPSEM_*), what the shell and
# pytest add.
ALLOWED_ENV = {
    "HOME", "PATH", "PWD", "OLDPWD", "SHELL", "SHLVL", "TERM", "LANG", "TZ", "_",
    "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE",
    "PYTHONDONTWRITEBYTECODE", "PYTEST_CURRENT_TEST", "COLUMNS", "LINES",
}  # fmt: skip


def test_term_is_set():
    assert os.environ.get("TERM"), "TERM is not set"


def test_home_is_root_home():
    assert os.environ.get("HOME") == "/root"
    assert os.path.isdir("/root")


def test_home_is_writable(run):
    p = run("f=$HOME/.capsem-doctor-probe && echo ok > $f && cat $f && rm $f")
    assert p.stdout == "ok\n", describe(p)


def test_path_has_the_standard_directories():
    path = os.environ.get("PATH", "").split(":")
    for d in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        assert d in path, f"{d} is not in PATH={path}"


def test_shell_is_bash():
    assert os.environ.get("SHELL") == "/bin/bash"
    assert pwd.getpwuid(os.getuid()).pw_shell == "/bin/bash"


def test_commands_run_in_the_workspace():
    assert os.getcwd() == WORKSPACE
    assert os.environ.get("PWD") == WORKSPACE


def test_commands_run_as_root():
    # The VM is the boundary: the guest's root is root of nothing else.
    assert os.getuid() == 0


def test_lang_is_utf8(run):
    assert "UTF-8" in os.environ.get("LANG", "").upper().replace("UTF8", "UTF-8")
    p = run(["python3", "-c", "import sys; print(sys.getfilesystemencoding(), sys.stdout.encoding)"])
    assert p.stdout.split() == ["utf-8", "utf-8"], describe(p)


def test_no_host_variables_leaked():
    extra = sorted(k for k in os.environ if k not in ALLOWED_ENV and not k.startswith(("CAPSEM_", "LC_")))
    assert not extra, f"unexpected variables in the guest: {extra}"


@pytest.mark.parametrize(
    "var",
    ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK"],
)
def test_secret_not_passed(var):
    assert var not in os.environ


def test_kernel_is_linux_6():
    assert platform.system() == "Linux"
    major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", platform.release()).groups())
    assert (major, minor) >= (6, 1), platform.release()


def test_architecture_is_the_images():
    # The doctor says which architecture it built the image for; the
    # kernel, the agent and every program in it must be that one.
    want = os.environ.get("CAPSEM_DOCTOR_ARCH")
    if not want:
        pytest.skip("CAPSEM_DOCTOR_ARCH is not set (not run by capsem doctor)")
    assert platform.machine() == want, f"uname -m is {platform.machine()}, the image was built for {want}"
    with open("/usr/local/bin/node", "rb") as f:
        elf = f.read(20)
    machine = int.from_bytes(elf[18:20], "little")
    assert elf[:4] == b"\x7fELF" and machine == {"x86_64": 62, "aarch64": 183}[want], f"node's ELF machine is {machine}"


def test_os_is_debian_bookworm():
    with open("/etc/os-release") as f:
        kv = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    assert kv.get("ID") == "debian" and kv.get("VERSION_CODENAME") == "bookworm", kv


def test_hostname_is_capsem():
    assert platform.node() == "capsem"


def test_clock_is_set():
    assert time.time() > 1704067200, "the guest's clock is before 2024"  # 2024-01-01


def test_randomness_is_available():
    a, b = os.getrandom(32, os.GRND_NONBLOCK), os.getrandom(32, os.GRND_NONBLOCK)
    assert a != b


def test_at_least_one_gib_of_memory():
    with open("/proc/meminfo") as f:
        total_kib = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
    assert total_kib >= 900 * 1024, f"MemTotal {total_kib} KiB"


@pytest.mark.parametrize("target", ["/tmp", "/dev/shm", "/run"])
def test_tmpfs_where_expected(target):
    m = mount_at(target)
    assert m is not None and m[2] == "tmpfs", f"{target} is {m}"


def test_tmp_is_world_writable_and_sticky():
    assert os.stat("/tmp").st_mode & 0o7777 == 0o1777


@pytest.mark.parametrize("target,fstype", [("/proc", "proc"), ("/sys", "sysfs"), ("/dev", "devtmpfs"), ("/dev/pts", "devpts")])
def test_kernel_filesystem_mounted(target, fstype):
    m = mount_at(target)
    assert m is not None and m[2] == fstype, f"{target} is {m}"


@pytest.mark.parametrize("target", ["/proc", "/sys"])
def test_kernel_filesystem_is_nosuid_noexec(target):
    opts = mount_at(target)[3]
    assert {"nosuid", "noexec", "nodev"} <= opts, f"{target}: {sorted(opts)}"


def test_workspace_is_a_shared_filesystem():
    m = mount_at(WORKSPACE)
    assert m is not None and m[2] in ("9p", "virtiofs"), f"/workspace is {m}"
    assert "nosuid" in m[3] and "nodev" in m[3], sorted(m[3])


def test_no_unexpected_mounts():
    allowed = {"/", "/dev", "/proc", "/sys", "/run", "/run/capsem/lower", "/run/capsem/rw",
               "/dev/pts", "/dev/shm", "/tmp", WORKSPACE}  # fmt: skip
    with open("/proc/mounts") as f:
        targets = {line.split()[1] for line in f}
    # Filesystems the kernel adds on its own under /sys are fine.
    extra = sorted(t for t in targets - allowed if not t.startswith("/sys/"))
    assert not extra, f"unexpected mounts: {extra}"
