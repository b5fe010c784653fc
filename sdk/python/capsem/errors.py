"""The errors the client raises: one base class, and one class per thing a
caller would handle differently."""

from typing import Sequence


class CapsemError(Exception):
    """Base of every error this package raises."""


class SandboxNotFound(CapsemError):
    """No sandbox of that name exists (``capsem start NAME`` creates it)."""


class SandboxNotRunning(CapsemError):
    """The sandbox exists but is stopped or crashed (``Sandbox.start`` starts it)."""


class AlreadyRunning(CapsemError):
    """``capsem start`` of a sandbox that is already running."""


class ForeignServer(CapsemError):
    """The sandbox's socket is served by a process of another user: the
    client hung up before sending anything. ``uid`` is that process's,
    ``socket`` the socket's path."""

    def __init__(self, socket: str, uid: int, want: int) -> None:
        super().__init__(
            f"{socket} is served by a process of uid {uid}, not by you (uid {want}): nothing was sent to it. "
            "Another user's process has taken the sandbox's socket: stop that process, remove the socket and its "
            "directory if they are not yours, and start the sandbox again")
        self.socket = socket
        self.uid = uid


class TooLarge(CapsemError):
    """A file too large to return in memory (``get_file`` without a file
    object); pass a file object to stream it."""


class PolicyError(CapsemError):
    """A policy reload was refused; the policy in force is kept. The message
    names the file and line."""


class APIError(CapsemError):
    """An error answer of the sandbox's API (docs/API.md): ``status`` is the
    HTTP status, ``message`` says what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{message} (HTTP {status})")
        self.status = status
        self.message = message


class CLIError(CapsemError):
    """The capsem command failed: ``code`` is its exit status, ``stderr`` what
    it said."""

    def __init__(self, code: int, stderr: str, argv: Sequence[str] = ()) -> None:
        super().__init__(f"capsem {' '.join(argv)}: exit {code}: {stderr.strip()}".replace("capsem : ", "capsem: "))
        self.code = code
        self.stderr = stderr
        self.argv = list(argv)  # the capsem command line that failed, without the binary
