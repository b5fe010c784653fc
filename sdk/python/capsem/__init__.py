"""capsem: drive long-lived capsem sandboxes from Python.

Standard library only. See sdk/python/README.md and docs/API.md; capsem.aio is the same API
for asyncio.

    import capsem
    sb = capsem.Sandbox.start("task-1", workspace="/src/repo", secrets=["ANTHROPIC_API_KEY"])
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
from .sandbox import EXIT_TIMEOUT, MAX_BUFFERED, AskHandler, ExecStream, Result, Sandbox, ls
from .envnames import credential_like

# The capsem this package was made with: version.Number in capsem's Go
# module, its one home (tests/clients_version_test.go checks they agree).
__version__ = "0.1.0"

__all__ = [
    "Sandbox", "Result", "ExecStream", "AskHandler", "ls", "EXIT_TIMEOUT", "MAX_BUFFERED", "credential_like",
    "CapsemError", "SandboxNotFound", "SandboxNotRunning", "AlreadyRunning",
    "PolicyError", "APIError", "CLIError", "ForeignServer", "TooLarge", "__version__",
]
