"""Sandbox names for the things agent frameworks key their sandboxes by (a
task id, a session id): readable when the id already makes a valid name,
else cleaned up with a hash of the id, so that two ids never share a
sandbox."""

import hashlib
import re

from .home import NAME_RULE


def sandbox_name(task_id: str, prefix: str = "task-") -> str:
    """The sandbox name for task_id: prefix + task_id when that is a valid
    name ([a-z0-9][a-z0-9-]{0,62}), else prefix + a cleaned-up form + "-" +
    10 hex digits of the id's SHA-256."""
    name = prefix + task_id
    if NAME_RULE.match(name):
        return name
    clean = re.sub(r"[^a-z0-9-]+", "-", task_id.lower()).strip("-")
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:10]
    return re.sub(r"-+", "-", f"{prefix}{clean[: 63 - len(prefix) - 11]}-{digest}")
