"""Backends for agent frameworks, built on the client: each module plugs
capsem sandboxes into one framework's interface for where commands run,
and imports nothing of that framework at import time (it need not be
installed to use or test the backend). hermes: hermes-agent's terminal
backends."""
