"""capsem: drive long-lived capsem sandboxes from Python (standard library
only). See sdk/python/README.md and docs/API.md.

    import capsem
    sb = capsem.Sandbox.start("task-1", workspace="/src/repo")
    r = sb.exec(["pytest", "-q"], timeout=600)
    print(r.exit_code, r.stdout.decode())
    sb.rm(force=True)
"""

from .errors import (
    AlreadyRunning,
    APIError,
    CapsemError,
    CLIError,
    ForeignServer,
    PolicyError,
    SandboxNotFound,
    SandboxNotRunning,
    TooLarge,
)
from .sandbox import EXIT_TIMEOUT, MAX_BUFFERED, ExecStream, Result, Sandbox, ls

__all__ = [
    "Sandbox", "Result", "ExecStream", "ls", "EXIT_TIMEOUT", "MAX_BUFFERED",
    "CapsemError", "SandboxNotFound", "SandboxNotRunning", "AlreadyRunning",
    "PolicyError", "APIError", "CLIError", "ForeignServer", "TooLarge",
]
