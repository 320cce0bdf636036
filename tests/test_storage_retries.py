"""Transient store errors are retried with backoff and counted (pipeline/storage/retry.py):
a store that refuses connections for a moment (the local S3 server started late) is
waited for; one that refuses for good is not retried; what the errors look like decides."""

from __future__ import annotations

import errno
import socket
import threading
from pathlib import Path

import pytest

from pipeline import storage
from pipeline.storage.retry import StorageError, StorageUnavailable, retried, transient
from tests.object_store import Bucket


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def one_try_per_call(monkeypatch: pytest.MonkeyPatch):
    """botocore tries each request once, so that our layer sees every transient error."""
    storage.set_storage_options({"s3": {"config_kwargs": {"retries": {"max_attempts": 1}}}})
    yield
    storage.set_storage_options({})


def test_a_store_that_comes_back_is_waited_for_and_the_retries_counted(
    s3: Bucket, monkeypatch: pytest.MonkeyPatch, one_try_per_call, tmp_path: Path
):
    from moto.server import ThreadedMotoServer

    port = _free_port()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setattr("pipeline.storage.retry.FIRST_DELAY", 0.5)  # 0.25 s or more, doubling
    late = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    # up after the client is made (well under a second) and before the tries end (3.75 s
    # or more); moto's state is shared, so the bucket is there
    starting = threading.Timer(1.5, late.start)
    before = storage.retry_count()
    starting.start()
    try:
        storage.write_bytes(f"{s3.url}/late.txt", b"written once the store is back\n")
        assert storage.read_bytes(f"{s3.url}/late.txt") == b"written once the store is back\n"
    finally:
        starting.join()
        late.stop()
    assert storage.retry_count() > before


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


def test_retried_gives_up_with_an_error_to_run_again(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("pipeline.storage.retry.FIRST_DELAY", 0.001)
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
