"""What the console needs before it serves (pure): a secret key long enough to sign its
cookies, and an admin account to sign in with."""

from __future__ import annotations

from ems.config import Settings

#: Characters EMS_ADMIN_SECRET_KEY has at least.
MIN_SECRET_KEY = 32
GENERATE_KEY = "python -c 'import secrets; print(secrets.token_urlsafe(48))'"
NO_ADMIN = (
    "no admin account exists, so nobody could sign in to manage the console: "
    "create one with: ems admin user add NAME --role admin"
)


def secret_key_problem(settings: Settings) -> str | None:
    """What is wrong with the console's secret key, or None."""
    key = settings.admin_secret_key
    if key is None:
        return (
            "EMS_ADMIN_SECRET_KEY is not set: the console signs its session cookies and "
            f"CSRF tokens with it. Set it to a random secret of at least {MIN_SECRET_KEY} "
            f"characters, e.g. the output of: {GENERATE_KEY}"
        )
    if len(key) < MIN_SECRET_KEY:
        return (
            f"EMS_ADMIN_SECRET_KEY has {len(key)} characters, fewer than {MIN_SECRET_KEY}: "
            f"set it to a longer random secret, e.g. the output of: {GENERATE_KEY}"
        )
    return None
