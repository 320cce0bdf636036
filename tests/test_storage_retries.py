"""Transient store errors are retried with backoff and counted (pipeline/storage/retry.py):
a store that refuses connections for a moment (the local S3 server started late) is
waited for; one that refuses for good is not retried; what the errors look like decides.
Every request is bounded by the storage limits (`MMS_STORAGE_*`), and a store that does
not answer in time ends the operation with an error saying so. Each test is gated on
events (a try that failed, a connection the listener holds), never on a clock."""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import suppress

import pytest

from pipeline import storage
from pipeline.storage.clients import with_client_options
from pipeline.storage.retry import (
    Limits,
    StorageError,
    StorageUnavailable,
    limits,
    retried,
    transient,
)
from tests.object_store import Bucket

TINY = {
    "MMS_STORAGE_CONNECT_TIMEOUT": "0.5",
    "MMS_STORAGE_READ_TIMEOUT": "0.5",
    "MMS_STORAGE_TRIES": "2",
}
"""Limits that make a store that does not answer fail in about two seconds."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Point s3fs at another endpoint: the environment, and no filesystem made for the
    endpoint before (s3fs keeps one per set of options, its client made once)."""
    import s3fs

    def point(url: str) -> None:
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        s3fs.S3FileSystem.clear_instance_cache()

    yield point
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def tiny_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Half-second timeouts and two tries, for the tests of a store that does not answer."""
    for name, value in TINY.items():
        monkeypatch.setenv(name, value)


def test_a_store_that_comes_back_is_waited_for_and_the_retries_counted(
    s3: Bucket, monkeypatch: pytest.MonkeyPatch, endpoint: Callable[[str], None]
):
    from moto.server import ThreadedMotoServer

    port = _free_port()
    endpoint(f"http://127.0.0.1:{port}")
    late = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    waits: list[int] = []

    def start_when_refused(attempt: int) -> float:
        """The wait after a failed try: the first starts the server (moto's state is
        shared, so the bucket is there), and none waits."""
        if not waits:
            late.start()  # returns once the server listens
        waits.append(attempt)
        return 0.0

    monkeypatch.setattr("pipeline.storage.retry.backoff", start_when_refused)
    before = storage.retry_count()
    try:
        storage.write_bytes(f"{s3.url}/late.txt", b"written once the store is back\n")
        assert storage.read_bytes(f"{s3.url}/late.txt") == b"written once the store is back\n"
    finally:
        if waits:
            late.stop()
    assert waits == [0]  # refused once (nothing listened), then answered
    assert storage.retry_count() == before + 1


@pytest.fixture
def full_listener() -> Iterator[str]:
    """The URL of a listener that never accepts, its queue filled by a connection of its
    own: the kernel drops every other connection's handshake, as a host that stopped
    answering does."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = listener.getsockname()[1]
    holder = socket.create_connection(("127.0.0.1", port))  # fills the queue
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        holder.close()
        listener.close()


def test_a_store_that_does_not_connect_ends_with_its_limits(
    s3: Bucket, endpoint: Callable[[str], None], tiny_limits, full_listener: str
):
    endpoint(full_listener)
    before = storage.retry_count()
    with pytest.raises(StorageUnavailable) as raised:
        storage.read_bytes(f"{s3.url}/x.jsonl")
    assert str(raised.value) == (
        f"cannot read {s3.url}/x.jsonl: no connection within 0.5 s, 2 tries; "
        "run the command again to resume"
    )
    assert storage.retry_count() == before + 1


@pytest.fixture
def deaf_listener() -> Iterator[str]:
    """The URL of a listener that takes connections and never reads from them: what is
    sent to it fills the sockets' buffers, then waits, as with a store that stopped."""
    listener = socket.create_server(("127.0.0.1", 0))
    taken: list[socket.socket] = []

    def take() -> None:
        with suppress(OSError):
            while True:
                taken.append(listener.accept()[0])

    threading.Thread(target=take, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        for held in taken:
            held.close()


@pytest.mark.skipif(not hasattr(socket, "TCP_USER_TIMEOUT"), reason="Linux's socket option")
def test_an_upload_the_store_stops_taking_ends_with_its_limits(
    s3: Bucket, endpoint: Callable[[str], None], tiny_limits, deaf_listener: str
):
    endpoint(deaf_listener)
    body = b"x" * (64 * 1024 * 1024)  # more than loopback's socket buffers hold
    with pytest.raises(StorageUnavailable) as raised:
        storage.write_bytes(f"{s3.url}/big.bin", body)
    assert str(raised.value).startswith(f"cannot write {s3.url}/big.bin: no answer within 0.5 s")


def test_a_missing_bucket_is_not_retried(s3: Bucket):
    before = storage.retry_count()
    with pytest.raises(FileNotFoundError):
        storage.read_bytes("s3://mms-no-such-bucket-here/x.jsonl")
    assert storage.retry_count() == before


def test_what_passes_is_retried_and_what_lasts_is_not():
    assert transient(ConnectionResetError())
    assert transient(TimeoutError())
    assert transient(OSError(errno.EIO, "We encountered an internal error. Please try again."))
    assert transient(OSError(errno.EBUSY, "SlowDown: Please reduce your request rate."))
    assert not transient(PermissionError("Access Denied"))
    assert not transient(FileNotFoundError("NoSuchKey"))
    assert not transient(ValueError("a bug"))
    cause = ConnectionRefusedError()
    wrapped = RuntimeError("the client failed")
    wrapped.__cause__ = cause
    assert transient(wrapped)


def _no_wait(attempt: int) -> float:
    return 0.0


def test_retried_gives_up_with_an_error_to_run_again(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("MMS_STORAGE_TRIES", raising=False)
    monkeypatch.setattr("pipeline.storage.retry.backoff", _no_wait)
    calls = []

    def refused() -> None:
        calls.append(1)
        raise ConnectionRefusedError("connection refused")

    with pytest.raises(StorageUnavailable, match="run the command again"):
        retried(refused, "cannot write s3://b/k")
    assert len(calls) == 6

    def denied() -> None:
        raise PermissionError("Access Denied")

    with pytest.raises(StorageError, match="cannot write s3://b/k: PermissionError"):
        retried(denied, "cannot write s3://b/k")


def test_a_timeout_is_told_as_no_answer(monkeypatch: pytest.MonkeyPatch, tiny_limits):
    monkeypatch.setattr("pipeline.storage.retry.backoff", _no_wait)
    calls = []

    def silent() -> None:
        calls.append(1)
        raise TimeoutError

    with pytest.raises(StorageUnavailable) as raised:
        retried(silent, "cannot read s3://b/k")
    assert str(raised.value) == (
        "cannot read s3://b/k: no answer within 0.5 s, 2 tries; run the command again to resume"
    )
    assert len(calls) == 2


def test_the_limits_come_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    for name in TINY:
        monkeypatch.delenv(name, raising=False)
    assert limits() == Limits(tries=6, connect_timeout=10.0, read_timeout=60.0)
    for name, value in TINY.items():
        monkeypatch.setenv(name, value)
    assert limits() == Limits(tries=2, connect_timeout=0.5, read_timeout=0.5)
    for name, wrong in [
        ("MMS_STORAGE_TRIES", "1.5"),
        ("MMS_STORAGE_TRIES", "0"),
        ("MMS_STORAGE_READ_TIMEOUT", "-1"),
        ("MMS_STORAGE_CONNECT_TIMEOUT", "soon"),
    ]:
        monkeypatch.setenv(name, wrong)
        with pytest.raises(StorageError, match=name):
            limits()
        monkeypatch.setenv(name, TINY[name])


def test_the_s3_client_is_bounded_and_a_users_options_win():
    settings = Limits(tries=2, connect_timeout=3.0, read_timeout=7.0)
    ours = with_client_options("s3", settings, {})["config_kwargs"]
    assert (ours["connect_timeout"], ours["read_timeout"]) == (3.0, 7.0)
    assert ours["retries"] == {"total_max_attempts": 1}
    theirs = with_client_options(
        "s3", settings, {"endpoint_url": "http://x", "config_kwargs": {"read_timeout": 300}}
    )
    assert theirs["endpoint_url"] == "http://x"
    assert theirs["config_kwargs"] == {**ours, "read_timeout": 300}
    assert with_client_options("gs", settings, {"project": "p"}) == {"project": "p"}
