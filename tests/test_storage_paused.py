"""A store that stops answering (paused, not gone: tests/paused_store.py, a proxy in front
of the local S3 server that reads and never answers) stops `mms run` within the storage
limits, with exit 1 and an error naming the object, whether it pauses before the run, on
the map side or mid-answer on the publication side; once it answers again, the same
command resumes to the bytes of a run never stopped. Every pause is set by an event (the
test's, or the request the proxy watches for), never a clock."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline import storage
from pipeline.storage import StorageUnavailable
from tests.object_store import Bucket
from tests.paused_store import PausableStore, Watch
from tests.test_storage_outputs import _comparable, _config, _local_files, _mms

LIMITS = {
    "MMS_STORAGE_CONNECT_TIMEOUT": "2",
    "MMS_STORAGE_READ_TIMEOUT": "2",
    "MMS_STORAGE_TRIES": "2",
}
"""Two-second timeouts and two tries: an operation on the paused store ends in a few
seconds. Set only while the store is to stop answering: the reruns, which it answers,
have the default limits, so that a busy machine cannot make them fail."""
ERROR = re.compile(
    r"^error: (?P<what>cannot [a-z]+(?: \S+ to)?) (?P<url>s3://\S+): (?P<why>.*)$", re.M
)
"""The line `mms run` ends with: what it did, to which object, and what happened."""


@pytest.fixture
def uninterrupted(tmp_path: Path) -> dict[str, bytes]:
    """What a run of the samples publishes into a local folder (the same bytes a stored
    output has: tests/test_storage_outputs.py)."""
    out = tmp_path / "out"
    result = _mms("run", str(_config(tmp_path, out)), "--workers", "2")
    assert result.exit_code == 0, result.output
    return _comparable(_local_files(out))


@pytest.fixture
def store(s3: Bucket, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[PausableStore]:
    """The local S3 server behind a pausable proxy, which s3fs reaches (the environment,
    and no filesystem made before for the server itself)."""
    import s3fs

    proxy = PausableStore(s3_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        yield proxy
    finally:
        proxy.close()
        s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def tiny_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny limits for the whole test."""
    for name, value in LIMITS.items():
        monkeypatch.setenv(name, value)


def _stopped_run(config: Path, workers: int) -> Any:
    """`mms run config` with the tiny limits: the store is to stop answering during it."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in LIMITS.items():
            patch.setenv(name, value)
        return _mms("run", str(config), "--workers", str(workers))


def _stopped(output: str, url: str) -> re.Match[str]:
    """The error line of a run the paused store stopped, checked: an object under `url`,
    no answer within the limits, and what to do."""
    found = ERROR.search(output)
    assert found is not None, output
    assert found["url"].startswith(url), output
    assert found["why"] == (
        "no answer within 2 s, 2 tries; run the command again to resume; finished parts are kept"
    ), output
    return found


def _answering(store: PausableStore) -> None:
    """Let the store answer again (the test's own looks at the bucket need it too)."""
    store.watch = None
    store.paused.clear()


def _resumed(store: PausableStore, s3: Bucket, config: Path, expected: dict[str, bytes]) -> str:
    """Let the store answer again, run `config` again and check its output is `expected`;
    what the run said."""
    _answering(store)
    rerun = _mms("run", str(config), "--workers", "2")
    assert rerun.exit_code == 0, rerun.output
    assert _comparable(s3.files("runs/out")) == expected
    return rerun.output


def test_a_store_paused_before_the_run(
    s3: Bucket, tmp_path: Path, uninterrupted: dict[str, bytes], store: PausableStore
):
    url = f"{s3.url}/runs/out"
    config = _config(tmp_path, url)
    store.paused.set()  # new connections are taken, and nothing is ever answered
    stopped = _stopped_run(config, 2)
    assert stopped.exit_code == 1, stopped.output
    _stopped(stopped.output, url)
    assert store.swallowed.is_set()
    _resumed(store, s3, config, uninterrupted)


def test_a_store_paused_on_the_map_side(
    s3: Bucket, tmp_path: Path, uninterrupted: dict[str, bytes], store: PausableStore
):
    url = f"{s3.url}/runs/out"
    config = _config(tmp_path, url)
    # each finished part's DONE is its last upload: two parts finish, the third's DONE
    # is never answered
    store.watch = Watch(b"/DONE HTTP/1.1", skip=2)
    stopped = _stopped_run(config, 1)
    assert stopped.exit_code == 1, stopped.output
    assert _stopped(stopped.output, url)["url"].startswith(f"{url}/.work/parts/")
    _answering(store)
    done = [path for path in s3.files("runs/out/.work") if path.endswith("/DONE")]
    assert len(done) == 2, done
    assert "Resumed: 2 of" in _resumed(store, s3, config, uninterrupted)


def test_a_store_paused_mid_answer_when_publishing(
    s3: Bucket, tmp_path: Path, uninterrupted: dict[str, bytes], store: PausableStore
):
    url = f"{s3.url}/runs/out"
    config = _config(tmp_path, url)
    bucket = s3.url.removeprefix("s3://")
    # the first shard's upload is taken, and its answer stops after its status line's
    # first bytes
    store.watch = Watch(f"PUT /{bucket}/runs/out/data/".encode(), answered=12)
    stopped = _stopped_run(config, 2)
    assert stopped.exit_code == 1, stopped.output
    assert _stopped(stopped.output, url)["url"].startswith(f"{url}/data/")
    _answering(store)
    assert "manifest.json" not in s3.files("runs/out")
    _resumed(store, s3, config, uninterrupted)


def test_every_kind_of_call_ends_on_a_paused_store(s3: Bucket, store: PausableStore, tiny_limits):
    data = bytes(range(256)) * 4096  # 1 MiB: its answer comes in many pieces
    storage.write_bytes(f"{s3.url}/big.bin", data)
    calls: dict[str, Callable[[], object]] = {
        "write": lambda: storage.write_bytes(f"{s3.url}/new.bin", b"x"),  # an upload
        "read": lambda: storage.read_bytes(f"{s3.url}/big.bin"),
        "look up": lambda: storage.exists(f"{s3.url}/big.bin"),
        "list": lambda: storage.find(f"{s3.url}/"),
        "remove": lambda: storage.remove(f"{s3.url}/big.bin"),
    }
    for what, call in calls.items():
        store.paused.set()
        with pytest.raises(StorageUnavailable, match=f"^cannot {what} {s3.url}/"):
            call()
        store.paused.clear()
    assert storage.read_bytes(f"{s3.url}/big.bin") == data


def test_a_read_paused_mid_answer_ends(s3: Bucket, store: PausableStore, tiny_limits):
    data = bytes(range(256)) * 4096
    storage.write_bytes(f"{s3.url}/big.bin", data)
    bucket = s3.url.removeprefix("s3://")
    store.watch = Watch(f"GET /{bucket}/big.bin".encode(), answered=64 * 1024)
    with (
        storage.open_read(f"{s3.url}/big.bin") as stream,
        pytest.raises(StorageUnavailable) as raised,
    ):
        stream.read()
    assert str(raised.value).startswith(f"cannot read {s3.url}/big.bin: no answer within 2 s")
    assert store.paused.is_set() and store.watch is None  # paused by the watched read
    _answering(store)
    assert storage.read_bytes(f"{s3.url}/big.bin") == data
