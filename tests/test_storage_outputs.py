"""Outputs and work directories on an object store (a local S3 server,
tests/object_store.py): `mms run` into `s3://bucket/out` publishes the bytes a local run
publishes, the manifest last; readers (`mms verify`, the loader, `load_dataset` through
`published_data_files`) trust only what a manifest lists; a publication killed between
uploads leaves no manifest (readers refuse) and the next run completes it; a run stopped
mid-map resumes from the parts its work directory on the store kept."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from pipeline import storage
from pipeline.cli import main
from pipeline.loader import LoaderError, OutputLoader
from pipeline.output.hub import OutputNotFound
from pipeline.output.stored import StoredOutput, fetch_stored_output, published_data_files
from tests.conftest import REPO
from tests.object_store import Bucket

SAMPLES = REPO / "data_samples"
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
INPUTS = [SAMPLES / "openai", SAMPLES / "sharegpt", SAMPLES / "mms"]


def _config(folder: Path, output: str | Path, inputs: list[Path] | None = None) -> Path:
    lines = ["name: stored", "inputs:"]
    lines += [f"  - path: {item}" for item in inputs or INPUTS]
    lines += [
        "stages:",
        "  lint: {fail_on: never}",
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 1024, overlong: truncate}}",
        "  shard: {splits: {train: 0.8, test: 0.2}}",
        f"output: {output}",
    ]
    place = folder / ("stored" if storage.is_url(str(output)) else "local")  # the same file
    place.mkdir(exist_ok=True)  # name either way: the lint report names it
    config = place / "config.yaml"
    config.write_text("\n".join(lines) + "\n")
    return config


def _mms(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _local_files(out: Path) -> dict[str, bytes]:
    return {
        path.relative_to(out).as_posix(): path.read_bytes()
        for path in sorted(out.rglob("*"))
        if path.is_file() and ".work" not in path.relative_to(out).parts
    }


def _comparable(files: dict[str, bytes]) -> dict[str, bytes]:
    """The files with what names the output's place taken out of the manifest (its
    config's `output` and the config digest made from it)."""
    manifest = orjson.loads(files["manifest.json"])
    manifest["config"]["output"] = None
    manifest["config_sha256"] = None
    return {**files, "manifest.json": orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS)}


@pytest.fixture
def local_output(tmp_path: Path) -> dict[str, bytes]:
    """What a run of the samples publishes into a local folder named `out`."""
    out = tmp_path / "out"
    result = _mms("run", str(_config(tmp_path, out)), "--workers", "2")
    assert result.exit_code == 0, result.output
    return _comparable(_local_files(out))


def test_a_stored_output_is_the_local_output(s3: Bucket, tmp_path: Path, local_output):
    url = f"{s3.url}/runs/out"
    result = _mms("run", str(_config(tmp_path, url)), "--workers", "2")
    assert result.exit_code == 0, result.output
    stored = s3.files("runs/out")
    assert not [path for path in stored if path.startswith(".work")]  # removed when done
    assert _comparable(stored) == local_output
    # the same config again: nothing to do, the stored output is finished
    again = _mms("run", str(_config(tmp_path, url)))
    assert again.exit_code == 0, again.output
    assert "Nothing to do" in again.output
    assert s3.files("runs/out") == stored


def test_readers_read_the_stored_output(s3: Bucket, tmp_path: Path):
    import datasets

    url = f"{s3.url}/out"
    assert _mms("run", str(_config(tmp_path, url))).exit_code == 0
    verified = _mms("verify", url)
    assert verified.exit_code == 0, verified.output
    files = published_data_files(url)
    local = fetch_stored_output(url, tmp_path / "cache")
    manifest = orjson.loads((local / "manifest.json").read_bytes())
    assert {split: len(urls) for split, urls in files.items()} == {
        split: len(entry["shards"]) for split, entry in manifest["splits"].items()
    }
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    loaded = datasets.load_dataset(  # the packaged parquet builder: the Hub is not asked
        "parquet",
        data_files=files,
        storage_options={"endpoint_url": endpoint},
        cache_dir=str(tmp_path / "hf-cache"),
    )
    assert {split: len(rows) for split, rows in loaded.items()} == {
        split: entry["rows"] for split, entry in manifest["splits"].items()
    }

    def batches(source: str | Path) -> list[list[list[int]]]:
        loader = OutputLoader(source, batch_size=4, seed=3)
        return [batch["input_ids"].tolist() for batch in loader]

    assert batches(url) == batches(local)


def test_a_prefix_without_its_manifest_is_refused_by_every_reader(s3: Bucket, tmp_path: Path):
    url = f"{s3.url}/out"
    assert _mms("run", str(_config(tmp_path, url))).exit_code == 0
    storage.remove(f"{url}/manifest.json")
    with pytest.raises(OutputNotFound, match=r"no manifest\.json"):
        published_data_files(url)
    with pytest.raises(LoaderError, match=r"no manifest\.json"):
        OutputLoader(url, batch_size=2)
    refused = _mms("verify", url)
    assert refused.exit_code == 2
    assert "no manifest.json" in refused.output


def test_a_prefix_mms_did_not_write_is_refused(s3: Bucket, tmp_path: Path):
    s3.put(SAMPLES / "mms" / "threads.jsonl", "theirs/data/notes.jsonl")
    url = f"{s3.url}/theirs"
    refused = _mms("run", str(_config(tmp_path, url, [SAMPLES / "mms"])))
    assert refused.exit_code == 2, refused.output
    assert "no mms command wrote it" in refused.output
    assert list(s3.files("theirs")) == ["data/notes.jsonl"]
    taken = _mms("run", str(_config(tmp_path, url, [SAMPLES / "mms"])), "--overwrite")
    assert taken.exit_code == 0, taken.output
    assert "data/notes.jsonl" not in s3.files("theirs")


def test_an_output_in_a_missing_bucket_is_a_usage_error(s3: Bucket, tmp_path: Path):
    refused = _mms("run", str(_config(tmp_path, "s3://mms-no-such-bucket/out", INPUTS[2:])))
    assert refused.exit_code == 2, refused.output
    assert "s3://mms-no-such-bucket/out" in refused.output and "create it first" in refused.output


def test_a_prefix_another_run_writes_is_refused(s3: Bucket, tmp_path: Path):
    url = f"{s3.url}/out"
    with StoredOutput(url):
        refused = _mms("run", str(_config(tmp_path, url, [SAMPLES / "mms"])))
    assert refused.exit_code == 2, refused.output
    assert "being written by another mms command" in refused.output
    assert _mms("run", str(_config(tmp_path, url, [SAMPLES / "mms"]))).exit_code == 0


def _killed_at(what: str, calls: int, args: list[str]) -> subprocess.CompletedProcess[str]:
    """`mms ARGS` in a new process that dies by SIGKILL at its `calls`th `what`
    (tests/storage_kill.py); it reaches the same local S3 server (the environment)."""
    command = [sys.executable, "-m", "tests.storage_kill", what, str(calls), "--", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def test_a_killed_publication_leaves_no_manifest_and_the_rerun_completes_it(
    s3: Bucket, tmp_path: Path, local_output
):
    url = f"{s3.url}/runs/out"
    config = str(_config(tmp_path, url))
    # uploads: the work directory's plan, then the staged files (data/ first)
    killed = _killed_at("publish-upload", 4, ["run", config, "--workers", "1"])
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    half = s3.files("runs/out")
    assert "manifest.json" not in half and any(p.startswith("data/") for p in half)
    assert any(p.startswith(".work/parts/") for p in half)
    with pytest.raises(OutputNotFound):
        published_data_files(url)
    assert _mms("verify", url).exit_code == 2
    rerun = _mms("run", config, "--workers", "1")
    assert rerun.exit_code == 0, rerun.output
    assert "Resumed" in rerun.output
    assert _comparable(s3.files("runs/out")) == local_output


def test_a_stopped_run_resumes_from_its_stored_work_directory(
    s3: Bucket, tmp_path: Path, local_output
):
    url = f"{s3.url}/runs/out"
    config = str(_config(tmp_path, url))
    # the first write_bytes is the work directory's marker; then each part's DONE: die at
    # the third part's, two parts finished on the store
    killed = _killed_at("part-marker", 4, ["run", config, "--workers", "1"])
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    work = s3.files("runs/out/.work")
    done = sorted(path for path in work if path.endswith("/DONE"))
    assert len(done) == 2, sorted(work)
    assert "manifest.json" not in s3.files("runs/out")
    rerun = _mms("run", config, "--workers", "2")
    assert rerun.exit_code == 0, rerun.output
    assert "Resumed: 2 of" in rerun.output
    assert _comparable(s3.files("runs/out")) == local_output


@pytest.mark.slow
def test_a_ray_run_reads_and_writes_the_store(s3: Bucket, tmp_path: Path):
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install '.[ray]')")
    inputs = [SAMPLES / "mms", SAMPLES / "sharegpt" / "fastchat_vicuna.json"]
    local = tmp_path / "out"
    assert _mms("run", str(_config(tmp_path, local, inputs))).exit_code == 0
    local_output = _comparable(_local_files(local))
    url = f"{s3.url}/runs/out"
    config = _config(tmp_path, url, inputs)
    text = config.read_text()
    for item in inputs:  # the inputs from the bucket too
        text = text.replace(f"path: {item}", f"path: {s3.put(item, f'in/{item.name}')}")
    config.write_text(text)
    # a short temp folder: Ray's socket paths under tmp_path would be too long
    short = tempfile.mkdtemp(prefix="mms-", dir="/tmp")
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in {"RAY_ADDRESS": "local", "RAY_AUTH_MODE": "disabled"}.items():
                patch.setenv(name, value)
            patch.setenv("TMPDIR", short)
            patch.setattr(tempfile, "tempdir", short)
            result = _mms("run", str(config), "--engine", "ray", "--workers", "2")
    finally:
        shutil.rmtree(short, ignore_errors=True)
    assert result.exit_code == 0, result.output
    stored = _comparable(s3.files("runs/out"))
    assert stored.keys() == local_output.keys()
    for name in local_output:  # ids name files under their input, wherever it lives
        if name.startswith(("tokenizer/", "data/")):
            assert stored[name] == local_output[name], name


def test_publications_killed_twice_over_an_earlier_output_end_as_one(s3: Bucket, tmp_path: Path):
    url = f"{s3.url}/out"
    inputs = INPUTS[1:]
    assert _mms("run", str(_config(tmp_path, url, inputs))).exit_code == 0
    earlier = s3.files("out")
    assert any(path.startswith("data/test-") for path in earlier)
    # a new config without a test split: its publication leaves the earlier test shards
    # to remove, and is killed twice before it gets there
    config = _config(tmp_path, url, inputs)
    config.write_text(config.read_text().replace("{train: 0.8, test: 0.2}", "{train: 1.0}"))
    for _ in range(2):
        killed = _killed_at("publish-upload", 3, ["run", str(config), "--workers", "1"])
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        assert "manifest.json" not in s3.files("out")
    done = _mms("run", str(config), "--workers", "1")
    assert done.exit_code == 0, done.output
    published = s3.files("out")
    assert not any(path.startswith(("data/test-", ".work")) for path in published)
    manifest = orjson.loads(published["manifest.json"])
    assert set(manifest["splits"]) == {"train"}
    assert _mms("verify", url).exit_code == 0
