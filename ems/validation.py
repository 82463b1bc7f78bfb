"""Pure validation of names, bodies, keys and headers. Raises ems.exceptions only."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from ems.exceptions import (
    BodyTooLarge,
    InvalidBody,
    InvalidHeaders,
    InvalidInput,
    InvalidKey,
    InvalidName,
    InvalidPartitionCount,
    InvalidPassword,
    InvalidSetting,
    caused,
)

NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")
#: Names of admin console users and API tokens (an e-mail address is one).
ACCOUNT_NAME_RE = re.compile(r"[A-Za-z0-9._@-]{1,64}")
MIN_PASSWORD = 12
MAX_PASSWORD = 1024
MAX_PARTITIONS = 4096
MAX_KEY_BYTES = 255
#: A body must fit one row within the server's default max_allowed_packet (16 MiB).
MAX_BODY_LIMIT = 8 * 1024 * 1024
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
#: Bytes of bodies one consumer fetch brings at most (a single larger message still comes,
#: alone), by default and at most.
DEFAULT_BATCH_BYTES = 4 * 1024 * 1024
MAX_BATCH_BYTES = 1024 * 1024 * 1024
DEFAULT_RETENTION_HOURS = 168

# One encoder for every message: json.dumps with options builds a new one per call.
_headers_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_HEADERS_CACHE_SIZE = 1024
_headers_cache: dict[tuple[tuple[str, str], ...], str] = {}


def check_name(name: object, what: str = "name") -> str:
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
        raise InvalidName(f"{what} {name!r} must match [A-Za-z0-9._-]{{1,128}}")
    return name


def check_account_name(name: object, what: str = "user name") -> str:
    """A user's or token's name: 1 to 64 letters, digits, '.', '_', '-' or '@'."""
    if not isinstance(name, str) or ACCOUNT_NAME_RE.fullmatch(name) is None:
        shown = repr(name) if isinstance(name, str) and len(name) <= 80 else "given"
        raise InvalidName(f"{what} {shown} must match [A-Za-z0-9._@-]{{1,64}}")
    return name


def check_password(password: object, name: str) -> str:
    """A new password: 12 to 1024 characters of text, not the account's name (nor it in
    another case). The message never shows the password."""
    if not isinstance(password, str):
        raise InvalidPassword(f"a password must be text, not {type(password).__name__}")
    if not password:
        raise InvalidPassword("the password is empty")
    if len(password) < MIN_PASSWORD:
        raise InvalidPassword(f"a password needs at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise InvalidPassword(f"a password has at most {MAX_PASSWORD} characters")
    if password.casefold() == name.casefold():
        raise InvalidPassword("the password must not be the account's name")
    try:
        password.encode("utf-8")
    except UnicodeEncodeError:
        raise caused(InvalidPassword("the password must be valid Unicode text"), None)  # noqa: B904 (see caused)
    return password


def check_partitions(partitions: object) -> int:
    if (
        not isinstance(partitions, int)
        or isinstance(partitions, bool)
        or not 1 <= partitions <= MAX_PARTITIONS
    ):
        raise InvalidPartitionCount(
            f"partitions must be an integer from 1 to {MAX_PARTITIONS}, not {partitions!r}"
        )
    return partitions


def check_positive_int(value: object, what: str, maximum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= maximum:
        raise InvalidSetting(f"{what} must be an integer from 1 to {maximum}, not {value!r}")
    return value


def _utf8(text: str, error: type[InvalidInput], what: str) -> bytes:
    """text as UTF-8; a lone surrogate (what Python makes of bytes that are not UTF-8,
    such as a command-line argument $'\\xff') cannot be, and is bad input."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        message = (
            f"{what} must be valid Unicode text; {text[exc.start : exc.end]!r} at "
            f"position {exc.start} is not (send bytes for binary data)"
        )
        raise caused(error(message), None)  # noqa: B904 (see caused)


def encode_body(body: object, max_bytes: int) -> bytes:
    # Exact-type checks first: this runs for every message published.
    if type(body) is bytes:
        data = body
    elif isinstance(body, str):
        data = _utf8(body, InvalidBody, "a message body")
    elif isinstance(body, bytes | bytearray | memoryview):
        data = bytes(body)
    else:
        raise InvalidBody(f"a message body must be bytes or str, not {type(body).__name__}")
    if len(data) > max_bytes:
        raise BodyTooLarge(f"body of {len(data)} bytes exceeds the topic's max of {max_bytes}")
    return data


def encode_key(key: object) -> bytes | None:
    if key is None:
        return None
    if isinstance(key, str):
        data = _utf8(key, InvalidKey, "a message key")
    elif isinstance(key, bytes):
        data = key
    else:
        raise InvalidKey(f"a message key must be str or bytes, not {type(key).__name__}")
    if len(data) > MAX_KEY_BYTES:
        raise InvalidKey(f"key of {len(data)} bytes exceeds {MAX_KEY_BYTES}")
    return data


def encode_headers(headers: object) -> str | None:
    if headers is None:
        return None
    if type(headers) is not dict and not isinstance(headers, Mapping):
        raise InvalidHeaders(f"headers must be a mapping, not {type(headers).__name__}")
    for name, value in headers.items():
        if (type(name) is not str and not isinstance(name, str)) or (
            type(value) is not str and not isinstance(value, str)
        ):
            raise InvalidHeaders(
                f"headers must map str to str; got {type(name).__name__}: "
                f"{type(value).__name__} for {name!r}"
            )
    if not headers:
        return None
    # Producers send the same few headers again and again: encode each set once. The
    # checks above still run every time; the cache holds only validated str pairs.
    items = tuple(headers.items())
    found = _headers_cache.get(items)
    if found is None:
        found = _headers_json(dict(items))
        _utf8(found, InvalidHeaders, "message headers")
        if len(_headers_cache) >= _HEADERS_CACHE_SIZE:
            _headers_cache.clear()
        _headers_cache[items] = found
    return found
