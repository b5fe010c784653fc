"""Which environment variable names look like credentials: what an
allowlist of host variables for a sandbox refuses unless told otherwise,
since the value of such a variable belongs in capsem's secrets (the guest
gets a placeholder, the value reaches only the hosts it is for), not in the
guest's environment."""

import re

# Words of a name (split at "_" and "-") that make it a credential's: a key
# (API_KEY, APIKEY, ACCESS_KEY, but not MONKEY), any word holding TOKEN,
# SECRET, PASSWORD or PASSWD, CREDENTIAL(S), or one of the short words
# credentials go by. Wider than exact: a false alarm costs the caller one
# flag, a miss puts a key in the guest.
_PART = re.compile(r"^((API|ACCESS|SECRET|PRIVATE|SIGNING|MASTER|ENCRYPTION)?KEYS?|.*TOKEN.*|.*SECRET.*|"
                   r".*PASSW(OR)?D.*|CREDENTIALS?|CREDS?|O?AUTH|PAT|PASS|PRIVATE|COOKIES?|"
                   r"SESSION|DSN|JWT|BEARER)$")


def credential_like(name: str) -> bool:
    """Whether name looks like a credential's variable (ANTHROPIC_API_KEY,
    GH_TOKEN, DB_PASSWORD, AWS_SECRET_ACCESS_KEY, SENTRY_DSN)."""
    return any(_PART.match(part) for part in re.split(r"[_\-]+", name.upper()) if part)
