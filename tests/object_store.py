"""A local S3-compatible server for the tests: moto's server mode on a free port, started
once per session, and a fresh bucket per test. The endpoint and dummy credentials reach
s3fs (and botocore) through the environment, as a user's would (`AWS_ENDPOINT_URL`), so
the processes a run forks and the `mms` commands a test starts find the same server."""

from __future__ import annotations

import logging
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
"""Dummy credentials: moto accepts any; no real account is ever reached."""


@dataclass(frozen=True)
class Bucket:
    """A bucket of the local server: its `s3://` URL, and helpers to fill and read it."""

    url: str

    def put(self, local: Path, key: str) -> str:
        """Upload a local file, or every file under a local folder, to `key`; its URL."""
        import s3fs

        fs = s3fs.S3FileSystem()
        target = f"{self.url}/{key}"
        if local.is_dir():
            for path in sorted(local.rglob("*")):
                if path.is_file():
                    fs.put_file(str(path), f"{target}/{path.relative_to(local).as_posix()}")
        else:
            fs.put_file(str(local), target)
        return target

    def files(self, prefix: str = "") -> dict[str, bytes]:
        """Every object under `prefix`, by key relative to it."""
        import s3fs

        fs = s3fs.S3FileSystem()
        fs.invalidate_cache()
        root = f"{self.url}/{prefix}".rstrip("/")
        bare = root.removeprefix("s3://")
        return {path[len(bare) + 1 :]: fs.cat_file(path) for path in sorted(fs.find(root))}


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server on a free local port, for the whole session."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Bucket:
    """A new, empty bucket on the local server, with the environment pointing s3fs at it
    (no profile or credentials file of the user's is read), and the temp folder (where a
    stored output's scratch folder goes) under tmp_path."""
    import s3fs

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    name = f"mms-test-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem().mkdir(name)
    return Bucket(f"s3://{name}")
