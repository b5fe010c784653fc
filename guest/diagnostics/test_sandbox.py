"""The guest's isolation: the image cannot be changed, the kernel is locked
down, nothing but the agent runs, and the only NIC is capsem's."""

import ctypes
import errno
import glob
import json
import os
import platform
import socket
import uuid

import pytest

from conftest import GATEWAY, describe, in_user_sandbox, mount_at, mounts, pid1_argv, run

LOWER = "/run/capsem/lower"  # guest/boot.DefaultRootLayout.Lower: the image
RW = "/run/capsem/rw"  # the tmpfs or disk with the overlay's upper and work dirs

# --- the root filesystem -----------------------------------------------------


def test_root_is_an_overlay_on_the_image():
    m = mount_at("/")
    assert m is not None and m[2] == "overlay", f"/ is {m}"
    assert f"lowerdir={LOWER}" in m[3], f"/ is not an overlay on the image: {m}"
    assert f"upperdir={RW}/upper" in m[3], m


def test_root_lower_is_read_only():
    m = mount_at(LOWER)
    assert m is not None, f"the image is not mounted at {LOWER}"
    assert m[2] in ("erofs", "squashfs"), f"the image is {m[2]}, want erofs or squashfs"
    assert "ro" in m[3], f"the image is mounted {sorted(m[3])}, want ro"


def test_root_lower_rejects_writes():
    with pytest.raises(OSError) as e:
        open(os.path.join(LOWER, f"capsem-doctor-{uuid.uuid4().hex}"), "w").close()
    assert e.value.errno == errno.EROFS, e.value


def test_root_lower_cannot_be_remounted_read_write():
    p = run(f"mount -o remount,rw {LOWER}")
    assert p.returncode != 0, "the image was remounted read-write:\n" + describe(p)
    assert "ro" in mount_at(LOWER)[3]


def test_root_block_device_is_read_only():
    dev = mount_at(LOWER)[0]
    name = os.path.basename(dev)
    with open(f"/sys/class/block/{name}/ro") as f:
        assert f.read().strip() == "1", f"{dev} is writable at the block layer"


def test_root_block_device_refuses_writes():
    # Writes back the block just read, bypassing the page cache: harmless
    # even if it went through, and it must not.
    import mmap

    dev = mount_at(LOWER)[0]
    buf = mmap.mmap(-1, 4096)
    try:
        fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
    except OSError as e:
        assert e.errno in (errno.EROFS, errno.EPERM, errno.EACCES), e
        return  # not even opened for writing
    try:
        assert os.preadv(fd, [buf], 0) == 4096
        with pytest.raises(OSError) as e:
            os.pwritev(fd, [buf], 0)
    finally:
        os.close(fd)
    assert e.value.errno in (errno.EIO, errno.EROFS, errno.EPERM, errno.EACCES), e.value


def test_overlay_upper_is_tmpfs_or_the_sandbox_disk():
    # capsem run: a tmpfs, gone at power-off. A long-lived sandbox: its
    # ext4 writable disk, the second virtio-blk device (capsem.rw), never
    # mounted so that its device nodes or setuid files work.
    m = mount_at(RW)
    assert m is not None, f"nothing mounted at {RW}"
    if in_user_sandbox():
        assert m[0] == "/dev/vdb" and m[2] == "ext4" and "nodev" in m[3], f"{RW} is {m}, want the ext4 disk /dev/vdb, nodev"
    else:
        assert m[2] == "tmpfs", f"{RW} is {m}, want tmpfs"


def test_write_to_usr_bin_lands_in_tmpfs_not_in_image():
    name = f"capsem-doctor-{uuid.uuid4().hex[:12]}"
    path = f"/usr/bin/{name}"
    with open(path, "w") as f:
        f.write("#!/bin/sh\n")
    try:
        assert os.path.exists(f"{RW}/upper/usr/bin/{name}"), "the write did not go to the overlay's upper layer"
        assert not os.path.exists(f"{LOWER}/usr/bin/{name}"), "the write reached the image"
    finally:
        os.unlink(path)


def test_guest_binaries_in_image_are_not_writable():
    with pytest.raises(OSError) as e:
        open(f"{LOWER}/usr/bin/bash", "r+b").close()
    assert e.value.errno == errno.EROFS, e.value


def test_no_setuid_or_setgid_files():
    # / is the union of the image and the upper: scanning both covers it.
    p = run(f"find {LOWER} {RW}/upper -xdev -type f -perm /6000", timeout=60)
    assert p.returncode == 0, describe(p)
    assert p.stdout.strip() == "", "setuid/setgid files:\n" + p.stdout


# --- the kernel ---------------------------------------------------------------


def sysctl(name):
    with open("/proc/sys/" + name.replace(".", "/")) as f:
        return f.read().strip()


@pytest.mark.parametrize(
    "name,want",
    [
        ("kernel.modules_disabled", "1"),
        ("kernel.kptr_restrict", "2"),
        ("kernel.dmesg_restrict", "1"),
        ("kernel.kexec_load_disabled", "1"),
    ],
)
def test_lockdown_sysctl(name, want):
    assert sysctl(name) == want


def test_module_loading_is_refused():
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/dev/null", os.O_RDONLY)
    try:
        # The syscall's number differs by architecture (the generic table
        # arm64 uses, and x86-64's own).
        SYS_finit_module = {"x86_64": 313, "aarch64": 273}[platform.machine()]
        r = libc.syscall(SYS_finit_module, fd, b"", 0)
        err = ctypes.get_errno()
    finally:
        os.close(fd)
    assert r == -1 and err == errno.EPERM, f"finit_module: {r}, {errno.errorcode.get(err)}; want EPERM"


def test_modules_disabled_cannot_be_turned_off():
    try:
        with open("/proc/sys/kernel/modules_disabled", "w") as f:
            f.write("0\n")
    except OSError:
        pass
    assert sysctl("kernel.modules_disabled") == "1"


def test_no_kernel_modules_on_disk():
    assert not glob.glob("/lib/modules/*/kernel") and not glob.glob("/usr/lib/modules/*/kernel")


def test_kallsyms_addresses_are_zeros():
    n = 0
    with open("/proc/kallsyms") as f:
        for n, line in enumerate(f, 1):
            addr = line.split()[0]
            assert set(addr) == {"0"}, f"/proc/kallsyms shows an address: {line.strip()}"
            if n >= 5000:
                break
    assert n > 0


def test_proc_modules_addresses_are_zeros():
    with open("/proc/modules") as f:
        for line in f:
            addr = line.split()[-1]
            assert int(addr, 16) == 0, f"/proc/modules shows an address: {line.strip()}"


def test_no_dev_mem():
    assert not os.path.exists("/dev/mem"), "/dev/mem exists: physical memory is one open() away"


def test_no_dev_port():
    assert not os.path.exists("/dev/port"), "/dev/port exists: I/O ports are one open() away"


def test_no_dev_kmem():
    assert not os.path.exists("/dev/kmem")


def test_kernel_ram_is_not_readable_through_dev_mem():
    # Even where a /dev/mem node exists (or is recreated with mknod), the
    # kernel's RAM above the first MiB must be refused (STRICT_DEVMEM).
    path = "/dev/mem" if os.path.exists("/dev/mem") else None
    if path is None:
        path = f"/tmp/capsem-doctor-mem-{uuid.uuid4().hex[:8]}"
        try:
            os.mknod(path, 0o600 | 0o020000, os.makedev(1, 1))
        except OSError:
            return  # no node and none can be made: nothing to read
    try:
        with pytest.raises(OSError) as e:
            with open(path, "rb", buffering=0) as f:
                f.seek(16 << 20)
                f.read(64)
        assert e.value.errno in (errno.EPERM, errno.EACCES, errno.EFAULT), e.value
    finally:
        if path != "/dev/mem":
            os.unlink(path)


def test_debugfs_is_not_mounted():
    assert not any(m[2] == "debugfs" for m in mounts())


def test_debugfs_cannot_be_mounted(out_dir):
    p = run(f"mount -t debugfs debugfs {out_dir}")
    if p.returncode == 0:
        run(f"umount {out_dir}")
    assert p.returncode != 0, "debugfs mounted: the kernel's internals are open to the guest"


def test_no_swap():
    with open("/proc/swaps") as f:
        lines = f.read().strip().splitlines()
    assert len(lines) <= 1, "swap is on:\n" + "\n".join(lines)
    with open("/proc/meminfo") as f:
        meminfo = dict(line.split(":", 1) for line in f)
    assert meminfo["SwapTotal"].split()[0] == "0"


# --- IPv6 ---------------------------------------------------------------------


@pytest.mark.parametrize("iface", ["all", "default", "eth0"])
def test_ipv6_disabled_sysctl(iface):
    assert sysctl(f"net.ipv6.conf.{iface}.disable_ipv6") == "1"


def test_no_ipv6_addresses():
    with open("/proc/net/if_inet6") as f:
        assert f.read().strip() == "", "an interface has an IPv6 address"


def test_ipv6_connect_fails():
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        err = s.connect_ex(("2606:4700:4700::1111", 443))
    finally:
        s.close()
    assert err != 0, "an IPv6 connection to the outside succeeded"


# --- processes ----------------------------------------------------------------


def processes():
    """{pid: (comm, argv)} of every process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        out[int(d)] = (comm, argv)
    return out


def test_agent_is_pid_1():
    argv = pid1_argv()
    assert argv and (argv[0] == "/init" or os.path.basename(argv[0]) == "capsem-agent"), f"PID 1 is {argv}"
    # /init is the agent's static binary, freed with the initramfs.
    exe = os.readlink("/proc/1/exe")
    assert exe.startswith("/init") or "capsem-agent" in exe, exe


def test_agent_serves_the_session():
    agents = [argv for comm, argv in processes().values() if argv and "capsem-agent" in argv[0]]
    assert agents, "no capsem-agent process"


@pytest.mark.parametrize("daemon", ["sshd", "cron", "systemd", "dbus-daemon", "rsyslogd", "getty"])
def test_no_daemon_running(daemon):
    found = [
        (pid, argv)
        for pid, (comm, argv) in processes().items()
        if comm.startswith(daemon) or (argv and os.path.basename(argv[0]).startswith(daemon))
    ]
    assert not found, f"{daemon} is running: {found}"


def test_nothing_listens_on_tcp():
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            for line in list(f)[1:]:
                fields = line.split()
                if fields[3] == "0A":  # TCP_LISTEN
                    listening.append(fields[1])
    assert not listening, f"listening TCP sockets: {listening}"


# --- the network interface ----------------------------------------------------


def test_only_nic_is_eth0():
    assert sorted(os.listdir("/sys/class/net")) == ["eth0", "lo"]


def test_eth0_is_on_198_18_0_0_24():
    p = run("ip -j -4 addr show dev eth0")
    assert p.returncode == 0, describe(p)
    addrs = [(a["local"], a["prefixlen"]) for i in json.loads(p.stdout) for a in i["addr_info"]]
    assert addrs == [("198.18.0.2", 24)], addrs


def test_default_route_is_capsem_gateway():
    p = run("ip -j -4 route show default")
    routes = json.loads(p.stdout)
    assert [(r.get("gateway"), r.get("dev")) for r in routes] == [(GATEWAY, "eth0")], routes


def test_resolver_is_capsem_gateway():
    with open("/etc/resolv.conf") as f:
        servers = [line.split()[1] for line in f if line.startswith("nameserver")]
    assert servers == [GATEWAY], servers
