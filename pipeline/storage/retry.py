"""Retry what an object store refuses for a moment (a dropped connection, a timeout, a 5xx,
`SlowDown`), with exponential backoff, and count the retries; and how long a request may
wait for the store (`limits`).

Every `s3://` request has a connect timeout and a read timeout (seconds:
`MMS_STORAGE_CONNECT_TIMEOUT`, `MMS_STORAGE_READ_TIMEOUT`; pipeline/storage/clients.py
hands them to the store's client, which tries each request once). An operation that fails transiently is tried
again here, `MMS_STORAGE_TRIES` times in all, and then raises StorageUnavailable, which
stops the part or the publication (never quarantines data: a run stopped there resumes);
a store that stops answering so costs at most tries x (timeout + backoff) per operation.
A permanent error (no such bucket, access denied) raises StorageError at once. The
retries are counted per process (`retry_count`) and `mms run` prints the total."""

from __future__ import annotations

import errno
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

ATTEMPTS = 6
"""Tries in all of one operation before it is given up, unless MMS_STORAGE_TRIES says."""
CONNECT_TIMEOUT = 10.0
"""Seconds a connection to the store may take, unless MMS_STORAGE_CONNECT_TIMEOUT says."""
READ_TIMEOUT = 60.0
"""Seconds the store may stay silent while an answer is awaited or read, unless
MMS_STORAGE_READ_TIMEOUT says."""
TRIES_VARIABLE = "MMS_STORAGE_TRIES"
CONNECT_TIMEOUT_VARIABLE = "MMS_STORAGE_CONNECT_TIMEOUT"
READ_TIMEOUT_VARIABLE = "MMS_STORAGE_READ_TIMEOUT"
FIRST_DELAY = 0.1
"""Seconds before the second try; each later wait doubles, up to MAX_DELAY."""
MAX_DELAY = 5.0

_TRANSIENT_ERRNOS = frozenset(
    {
        errno.EIO,
        getattr(errno, "EREMOTEIO", errno.EIO),
        errno.EAGAIN,
        errno.EBUSY,
        errno.ETIMEDOUT,
        errno.ECONNRESET,
        errno.ECONNREFUSED,
        errno.ECONNABORTED,
        errno.EPIPE,
    }
)
_TRANSIENT_NAMES = frozenset(
    {
        "ClientConnectorError",
        "ClientOSError",
        "ClientPayloadError",
        "ConnectTimeoutError",
        "ConnectionClosedError",
        "EndpointConnectionError",
        "FSTimeoutError",
        "HTTPClientError",
        "IncompleteRead",
        "ReadTimeoutError",
        "ResponseParserError",
        "ServerDisconnectedError",
    }
)
"""Exception classes of the stores' clients (aiohttp, botocore, fsspec) that say the
connection failed, named so that no client has to be imported to tell."""
_TRANSIENT_WORDS = (
    "SlowDown",
    "reduce your request rate",
    "ServiceUnavailable",
    "Service Unavailable",
    "InternalError",
    "RequestTimeout",
    "Throttl",
    "TooManyRequests",
    "Too Many Requests",
    "Bad Gateway",
    "Gateway Time",
)

_TIMEOUT_NAMES = {
    "ConnectTimeoutError": "connect",
    "ConnectionTimeoutError": "connect",
    "ReadTimeoutError": "read",
    "SocketTimeoutError": "read",
    "ServerTimeoutError": "read",
    "FSTimeoutError": "read",
    "TimeoutError": "read",
    "timeout": "read",
}
"""Exception classes (botocore's, aiohttp's, fsspec's, Python's) that say a connection was
not made in time, or an answer did not come (or stopped coming) in time."""

_retries = 0


class StorageError(OSError):
    """An object-store operation failed for good; the message names the URL and why."""


class StorageUnavailable(StorageError):
    """The store kept failing with errors that usually pass (after every retry): running
    the same command again resumes where it stopped."""


@dataclass(frozen=True)
class Limits:
    """How long one request may wait for the store, and how often an operation is tried."""

    tries: int = ATTEMPTS
    connect_timeout: float = CONNECT_TIMEOUT
    read_timeout: float = READ_TIMEOUT


def limits() -> Limits:
    """The limits the environment sets (read at each call, so that workers and a changed
    environment agree); StorageError for a value that is not a positive number."""
    return Limits(
        tries=int(_setting(TRIES_VARIABLE, ATTEMPTS, whole=True)),
        connect_timeout=_setting(CONNECT_TIMEOUT_VARIABLE, CONNECT_TIMEOUT),
        read_timeout=_setting(READ_TIMEOUT_VARIABLE, READ_TIMEOUT),
    )


def _setting(variable: str, default: float, *, whole: bool = False) -> float:
    """The positive number in the environment variable `variable`, else `default`."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = 0
    if not value > 0 or value == float("inf"):
        kind = "a whole number of tries" if whole else "a number of seconds"
        raise StorageError(f"{variable}={text!r}: expected {kind} above 0")
    return value


def retry_count() -> int:
    """The retries this process has made since it started (or `reset_retry_count`)."""
    return _retries


def reset_retry_count() -> int:
    """Set the count back to 0; returns what it was."""
    global _retries
    was, _retries = _retries, 0
    return was


def add_retries(count: int) -> None:
    """Add retries made elsewhere (a worker's, reported with its part) to this count."""
    global _retries
    _retries += count


def transient(error: BaseException) -> bool:
    """Whether `error` (or what caused it) is one that usually passes when tried again."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, StorageError):
            return isinstance(current, StorageUnavailable)
        if isinstance(current, (ConnectionError, TimeoutError)):
            return True
        if type(current).__name__ in _TRANSIENT_NAMES:
            return True
        if isinstance(current, OSError) and current.errno in _TRANSIENT_ERRNOS:
            return True
        if not isinstance(current, (FileNotFoundError, PermissionError)) and any(
            word in str(current) for word in _TRANSIENT_WORDS
        ):
            return True
        current = current.__cause__ or current.__context__
    return False


def backoff(attempt: int) -> float:
    """Seconds to wait before try `attempt + 2`: doubling from FIRST_DELAY, capped, with
    jitter (so that many workers do not come back at the same moment)."""
    delay: float = min(MAX_DELAY, FIRST_DELAY * (2**attempt))
    return delay * (0.5 + random.random() / 2)


def retried(action: Callable[[], T], what: str) -> T:
    """`action()`, tried again after a transient error (counted), up to `limits().tries`
    tries. Raises StorageUnavailable when every try failed transiently, StorageError
    (naming `what`) for a permanent error, FileNotFoundError as it is (callers ask for
    it)."""
    global _retries
    settings = limits()
    for attempt in range(settings.tries):
        try:
            return action()
        except FileNotFoundError:
            raise
        except Exception as err:
            if not transient(err):
                if isinstance(err, StorageError):
                    raise
                raise StorageError(f"{what}: {_reason(err)}") from err
            if attempt + 1 == settings.tries:
                raise StorageUnavailable(
                    f"{what}: {_given_up(err, settings)}; run the command again to resume"
                ) from err
            _retries += 1
            time.sleep(backoff(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def _given_up(error: BaseException, settings: Limits) -> str:
    """What happened to the last of `settings.tries` tries that all failed with `error`'s
    kind: no answer in time, or the store's error."""
    tries = f"{settings.tries} {'try' if settings.tries == 1 else 'tries'}"
    waited = _timed_out(error)
    if waited == "connect":
        return f"no connection within {settings.connect_timeout:g} s, {tries}"
    if waited == "read":
        return f"no answer within {settings.read_timeout:g} s, {tries}"
    return f"the store kept failing ({_reason(error)}) after {tries}"


def _timed_out(error: BaseException) -> str | None:
    """ "connect" or "read" when `error` (or what caused it) is a timeout of that kind, the
    outermost timeout telling (a connect timeout is caused by a bare TimeoutError)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        kind = _TIMEOUT_NAMES.get(type(current).__name__)
        if kind is not None:
            return kind
        current = current.__cause__ or current.__context__
    return None


def _reason(error: BaseException) -> str:
    """The error's class and message, for a StorageError's message."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
