"""Shared test fixtures: repository paths, the ../shared data folder, hypothesis profile."""

from __future__ import annotations

import os
from pathlib import Path

import pandas  # noqa: F401  # see below
import pytest
from hypothesis import settings

# imported first: this process hands pyarrow pandas objects (datasets), so an `mms run` a
# test invokes here must leave pyarrow's pandas probes alone (pipeline/arrow_pandas.py),
# whichever test runs first; the runs a test starts as processes skip them

pytest_plugins = ["tests.object_store"]  # `s3`: a bucket on a local S3 server

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MMS_SHARED", REPO.parent / "shared"))
DATA = REPO / "tests" / "data"

settings.register_profile("mms", derandomize=True, max_examples=300, deadline=None)
settings.load_profile("mms")


@pytest.fixture(scope="session", autouse=True)
def proofs_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tokenizer proofs cache (pipeline/tokenize/proofs.py) of this test session, never
    the user's; the runs a test starts inherit it."""
    folder = tmp_path_factory.mktemp("mms-cache")
    os.environ["MMS_CACHE_DIR"] = str(folder)
    return folder


@pytest.fixture(scope="session")
def shared() -> Path:
    """The ../shared folder of real public files; tests using it skip when it is absent."""
    if not (SHARED / "DESIGN.md").is_file():
        pytest.skip(f"real data folder {SHARED} is absent (set MMS_SHARED to point at it)")
    return SHARED


def needs_shared(*paths: str) -> Path:
    """The ../shared folder, for a test of large third-party files that tests/data holds
    only in part or not at all (every record of a trimmed file, a real tokenizer): skips,
    naming the files (`paths`, relative to ../shared), when any of them is absent."""
    missing = [path for path in paths if not (SHARED / path).exists()]
    if missing:
        pytest.skip(
            f"needs the full third-party files {', '.join(missing)}, absent under {SHARED} "
            "(tests/data holds only small copies; set MMS_SHARED to point at them)"
        )
    return SHARED


@pytest.fixture(scope="session")
def data() -> Path:
    """tests/data: small copies of real public files from ../shared (the same layout,
    formats/ and realdata/; large files trimmed to their first records, each folder's
    PROVENANCE.txt says what and from where). Tests of real files use it, so they run on a
    fresh clone; only tests about every record of the large files use `shared`."""
    return DATA


@pytest.fixture
def offline_hf(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`datasets` and the Hub stay offline and cache under tmp_path; they read these
    variables when first imported, so their settings are patched as well."""
    import datasets.config
    import huggingface_hub.constants

    cache = tmp_path / ".hf-home"
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(cache))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache / "datasets")
