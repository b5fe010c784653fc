"""Where a sandbox is on disk, as capsem's Go package sandbox/home has it:
the data directory, a sandbox's directory, its lock and its API socket
(with the fallback for paths too long for a unix socket address). The
client finds a running sandbox's socket with it, without running
`capsem ls`.

This restates sandbox/home's rules (layout.go, lock.go, socket.go) and
store.DefaultDir: sandbox/home/home_python_test.go runs this file against
the Go code for a set of directories and environments, so that a change to
one that the other does not make fails there."""

import fcntl
import hashlib
import os
import re

# NAME_RULE is what a sandbox name must match (home.NameRule).
NAME_RULE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")

# MAX_SOCKET_PATH is the longest unix socket path capsem binds (home.MaxSocketPath).
MAX_SOCKET_PATH = 103


def default_data_dir() -> str:
    """The data directory capsem uses without --data (store.DefaultDir)."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    if xdg:
        return os.path.normpath(os.path.join(xdg, "capsem"))
    h = os.environ.get("HOME", "")
    if h:
        return os.path.normpath(os.path.join(h, ".local", "share", "capsem"))
    return ".capsem"


def sandbox_dir(data: str, name: str) -> str:
    """Sandbox name's directory under the data directory data (home.New)."""
    return os.path.normpath(os.path.join(data, "sandboxes", name))


def fallback_socket_dir() -> str:
    """Where sockets whose path in their own directory is too long go
    (home.FallbackSocketDir)."""
    base = os.environ.get("XDG_RUNTIME_DIR", "")
    if base:
        return os.path.normpath(os.path.join(base, "capsem"))
    tmp = os.environ.get("TMPDIR", "") or "/tmp"  # os.TempDir on Unix
    return os.path.normpath(os.path.join(tmp, "capsem-%d" % os.geteuid()))


def socket_path_in(directory: str, name: str) -> str:
    """Where the API of directory (a sandbox's) named name listens
    (home.SocketPathIn)."""
    p = os.path.normpath(os.path.join(directory, "api.sock"))
    if len(os.fsencode(p)) <= MAX_SOCKET_PATH:
        return p
    digest = hashlib.sha256(os.fsencode(os.path.abspath(directory))).hexdigest()[:16]
    short = os.fsencode(name)[:40].decode(errors="ignore")
    return os.path.join(fallback_socket_dir(), short + "-" + digest + ".sock")


def socket_path(data: str, name: str) -> str:
    """The API socket of sandbox name under data (home.Dir.SocketPath)."""
    return socket_path_in(sandbox_dir(data, name), name)


def locked(data: str, name: str) -> bool:
    """Whether a supervisor holds sandbox name's lock, that is, it runs
    (home.Dir.Locked: a shared, non-blocking flock, dropped at once)."""
    try:
        fd = os.open(os.path.join(sandbox_dir(data, name), "lock"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False
