"""Retry what an object store refuses for a moment (a dropped connection, a timeout, a 5xx,
`SlowDown`), with exponential backoff, and count the retries.

The store's own client retries first (s3fs and botocore do, a few times); what still fails
comes here, is tried again up to ATTEMPTS times in all, and then raises StorageUnavailable,
which stops the part or the publication (never quarantines data: a run stopped there
resumes). A permanent error (no such bucket, access denied) raises StorageError at once.
The retries are counted per process (`retry_count`); a run records the total in its
manifest (`storage.retries`) and prints it."""

from __future__ import annotations

import errno
import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

ATTEMPTS = 6
"""Tries in all of one operation before it is given up."""
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

_retries = 0


class StorageError(OSError):
    """An object-store operation failed for good; the message names the URL and why."""


class StorageUnavailable(StorageError):
    """The store kept failing with errors that usually pass (after every retry): running
    the same command again resumes where it stopped."""


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
    """`action()`, tried again after a transient error (counted), up to ATTEMPTS tries.
    Raises StorageUnavailable when every try failed transiently, StorageError (naming
    `what`) for a permanent error, FileNotFoundError as it is (callers ask for it)."""
    global _retries
    for attempt in range(ATTEMPTS):
        try:
            return action()
        except FileNotFoundError:
            raise
        except Exception as err:
            if not transient(err):
                if isinstance(err, StorageError):
                    raise
                raise StorageError(f"{what}: {_reason(err)}") from err
            if attempt + 1 == ATTEMPTS:
                raise StorageUnavailable(
                    f"{what}: the store kept failing ({_reason(err)}) after {ATTEMPTS} tries; "
                    "run the command again to resume"
                ) from err
            _retries += 1
            time.sleep(backoff(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def _reason(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
