"""`mms push` against a local stand-in of the Hub (tests/hub_stand_in.py, which says what it
does not reproduce): the dry run lists exactly the manifest's files; a push makes a
repository that `datasets` loads with the output's rows and whose card loads from it;
pushing twice makes one commit; an interrupted push sends only what is missing; a tampered,
unfinished or unlisted output is refused before anything is sent."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import datasets
import huggingface_hub.constants
import huggingface_hub.utils._http
import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from huggingface_hub import DatasetCard

import pipeline.jobs.push
from pipeline.cli import main
from pipeline.jobs.push import PushError, push_output
from pipeline.loader import OutputLoader
from pipeline.wording import visible
from tests.conftest import REPO
from tests.hub_stand_in import HubStandIn, point_client_at

REPO_ID = "me/quickstart"


@pytest.fixture(scope="module")
def output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of the quickstart config, copied by each test that changes it."""
    out = tmp_path_factory.mktemp("push") / "quickstart"
    result = CliRunner().invoke(
        main, ["run", str(REPO / "configs" / "quickstart.yaml"), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubStandIn]:
    """The stand-in, with the client pointed at it (HF_ENDPOINT) and Xet off (the stand-in
    has no Xet storage)."""
    with HubStandIn() as server:
        point_client_at(monkeypatch, tmp_path, server.endpoint, xet=False)
        yield server
        assert server.unhandled == [] and server.errors == []


def manifest_files(out: Path) -> set[str]:
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    listed = {"README.md", "manifest.json", *manifest["reports"]}
    listed |= {entry["path"] for entry in manifest["files"]}
    listed |= {s["path"] for split in manifest["splits"].values() for s in split["shards"]}
    return listed


def push(out: Path, *args: str):
    return CliRunner().invoke(main, ["push", str(out), REPO_ID, "--token", "hf_fake", *args])


def test_a_dry_run_lists_exactly_the_manifests_files_and_sends_nothing(
    output: Path, hub: HubStandIn
) -> None:
    result = push(output, "--dry-run")
    assert result.exit_code == 0, result.output
    listed = {line.split()[-1] for line in result.output.splitlines() if line.startswith("  send")}
    assert listed == manifest_files(output)
    assert {
        path.relative_to(output).as_posix() for path in output.rglob("*") if path.is_file()
    } == listed
    assert "a new repository" in result.output
    assert not hub.uploads and not hub.repos


def test_a_push_makes_a_repository_datasets_loads_and_a_second_push_no_commit(
    output: Path, hub: HubStandIn, tmp_path: Path
) -> None:
    result = push(output)
    assert result.exit_code == 0, result.output
    assert "in 1 commit(s)" in result.output
    commits = hub.commits(REPO_ID, repo_type="dataset")
    copy = tmp_path / "copy"
    hub.materialize(REPO_ID, copy, repo_type="dataset")
    assert {
        p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()
    } >= manifest_files(output)
    for path in manifest_files(output) - {"README.md"}:
        assert (copy / path).read_bytes() == (output / path).read_bytes(), path
    loaded = datasets.load_dataset(str(copy), cache_dir=str(tmp_path / "cache"))
    local = pq.read_table(output / "data" / "train-00000-of-00001.parquet")
    assert loaded["train"]["id"] == local["id"].to_pylist()
    card = (copy / "README.md").read_text(encoding="utf-8")
    assert f'load_dataset("{REPO_ID}")' in card and 'load_dataset("quickstart")' not in card
    assert f'from_pretrained("{REPO_ID}", subfolder="tokenizer")' in card
    assert f'GenerationConfig.from_pretrained("{REPO_ID}", subfolder="tokenizer")' in card
    assert '_pretrained("quickstart/tokenizer")' not in card
    assert DatasetCard(card).data.license
    again = push(output)
    assert again.exit_code == 0, again.output
    assert "already holds this output" in again.output
    assert hub.commits(REPO_ID, repo_type="dataset") == commits


def test_an_interrupted_push_sends_only_what_is_missing(
    output: Path, hub: HubStandIn, tmp_path: Path
) -> None:
    hub.fail("commit", times=1, status=500)
    with pytest.raises(PushError, match="the Hub refused"):
        push_output(output, REPO_ID, token="hf_fake")
    sent = [upload for upload in hub.uploads if upload.kind == "lfs"]
    assert len(sent) == 2  # the two shards reached the LFS store before the commit failed
    result = push(output)
    assert result.exit_code == 0, result.output
    assert [upload for upload in hub.uploads if upload.kind == "lfs"] == sent  # not sent again


def test_a_branch_and_a_pull_request(output: Path, hub: HubStandIn) -> None:
    assert push(output, "--revision", "v2", "--message", "Second pass").exit_code == 0
    assert hub.commits(REPO_ID, repo_type="dataset", revision="v2")[-1].title == "Second pass"
    assert len(hub.commits(REPO_ID, repo_type="dataset")) == 1  # main: the initial commit
    result = push(output, "--create-pr")
    assert result.exit_code == 0, result.output
    assert "pull request:" in result.output


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("shard", "sha256 differs from the manifest's"),
        ("workdir", "work directory of an unfinished command"),
        ("extra", "notes.txt"),
        ("temporary", ".train-00000-of-00001.parquet.tmp"),
    ],
)
def test_a_broken_output_is_refused_before_anything_is_sent(
    output: Path, hub: HubStandIn, tmp_path: Path, damage: str, reason: str
) -> None:
    out = tmp_path / "quickstart"
    shutil.copytree(output, out)
    if damage == "shard":
        with open(out / "data" / "train-00000-of-00001.parquet", "r+b") as shard:
            shard.seek(100)
            shard.write(b"\x00\x01\x02")
    elif damage == "workdir":
        (out / ".work").mkdir()
    elif damage == "extra":
        (out / "notes.txt").write_text("mine")
    else:
        (out / "data" / ".train-00000-of-00001.parquet.tmp").write_bytes(b"half")
    result = push(out)
    assert result.exit_code == 1
    assert reason in result.output
    assert not hub.repos and not hub.uploads


def test_a_failed_gate_is_never_published(hub: HubStandIn, tmp_path: Path) -> None:
    out = tmp_path / "gated"
    config = REPO / "configs" / "lint_only.yaml"
    assert CliRunner().invoke(main, ["run", str(config), "-o", str(out)]).exit_code == 1
    result = push(out)
    assert result.exit_code == 1 and "the lint gate failed" in result.output
    assert not hub.repos


def test_a_bad_repository_id_is_a_usage_error(output: Path) -> None:
    result = CliRunner().invoke(main, ["push", str(output), "no-namespace"])
    assert result.exit_code == 2 and "not a repository id like ORG/NAME" in result.output


@pytest.mark.parametrize(
    ("repo_id", "problem"),
    [
        ("org/../outside", "`..` is not allowed"),
        ("a/b/c", "this has 3 parts"),
        ("-x/y", "`-x` starts or ends with `-` or `.`"),
        ("org/na\x1bme", "`\\x1b` not allowed"),
        ("org/name.git", "ends with `.git`"),
    ],
)
def test_a_repository_id_is_checked_by_the_hubs_rules(
    output: Path, repo_id: str, problem: str
) -> None:
    """By `mms push` (before anything is read or sent), `push_output`, and the commands
    reading a pushed output back (stats, verify, inspect: hf:ORG/NAME[@REVISION])."""
    pushed = CliRunner().invoke(main, ["push", str(output), "--", repo_id, "--dry-run"])
    assert pushed.exit_code == 2
    assert "not a repository id like ORG/NAME: " in pushed.output and problem in pushed.output
    with pytest.raises(PushError, match="is not a Hub repository id"):
        push_output(output, repo_id, dry_run=True)
    for command in ("stats", "verify", "inspect"):
        result = CliRunner().invoke(main, [command, f"hf:{repo_id}@v1"])
        assert result.exit_code == 2
        (error,) = [line for line in result.output.splitlines() if line.startswith("Error:")]
        assert error.startswith(f"Error: hf:{visible(repo_id)}@v1: not a Hub dataset id: ")
        assert problem in error


def test_a_pushed_output_reads_back_by_its_hub_name_online_and_from_the_cache(
    output: Path, hub: HubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert push(output).exit_code == 0
    name = f"hf:{REPO_ID}"
    verified = CliRunner().invoke(main, ["verify", name, "--no-template"])
    assert verified.exit_code == 0, verified.output
    assert "verified" in verified.output and "rows rendered again" in verified.output
    shown = CliRunner().invoke(main, ["inspect", name])
    assert shown.exit_code == 0 and "thread " in shown.output
    loaded = OutputLoader(name, batch_size=4, shuffle=False)
    first = next(iter(loaded))
    assert len(first["input_ids"]) == 4
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    asked = len(hub.requests)
    again = CliRunner().invoke(main, ["verify", name, "--no-render", "--no-template"])
    assert again.exit_code == 0, again.output
    assert len(hub.requests) == asked  # offline: from the cache, nothing asked of the Hub
    missing = CliRunner().invoke(main, ["verify", "hf:me/never-pushed"])
    assert missing.exit_code == 2 and "cannot be fetched" in missing.output


def test_a_run_with_push_to_hub_publishes_when_it_succeeds(hub: HubStandIn, tmp_path: Path) -> None:
    config = tmp_path / "push.yaml"
    text = (REPO / "configs" / "quickstart.yaml").read_text(encoding="utf-8")
    text = text.replace("../data_samples/", f"{REPO}/data_samples/").replace(
        "sample_tokenizer", str(REPO / "configs" / "sample_tokenizer")
    )
    text = text.replace(
        "output: ../out/quickstart",
        f"output:\n  path: {tmp_path / 'out'}\n  push_to_hub: {{repo: {REPO_ID}, private: true}}",
    )
    config.write_text(text, encoding="utf-8")
    skipped = CliRunner().invoke(main, ["run", str(config), "--no-push"])
    assert skipped.exit_code == 0, skipped.output
    assert not hub.repos
    pushed = CliRunner().invoke(main, ["run", str(config)])
    assert pushed.exit_code == 0, pushed.output
    assert f"to {REPO_ID}@main" in pushed.output
    assert hub.repo(REPO_ID).private
    files = hub.commits(REPO_ID)[-1].files
    assert "manifest.json" in files and "data/train-00000-of-00001.parquet" in files
    manifest = orjson.loads(files["manifest.json"])
    assert manifest["config"]["push_to_hub"] == {"repo": REPO_ID, "private": True}


def test_without_a_token_or_a_reachable_hub_the_push_says_so(
    output: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    result = CliRunner().invoke(main, ["push", str(output), REPO_ID])
    assert result.exit_code == 1 and "no Hub token" in result.output
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", closed)
    # the client retries a refused connection with backoff (23 s): not its waits here
    monkeypatch.setattr(huggingface_hub.utils._http.time, "sleep", lambda seconds: None)
    result = push(output, "--dry-run")
    assert result.exit_code == 1 and f"cannot reach the Hub at {closed}" in result.output


def closed_port_endpoint() -> str:
    """An endpoint nobody listens on: connecting to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_an_unreachable_hub_is_one_clear_line_at_once(output: Path, tmp_path: Path) -> None:
    """A refused connection fails at the first request, not after the client's backoff
    (5 retries over 23 s), and none of the client's retry lines reach the terminal (its
    log handler writes to the process's stderr: a subprocess, as a user runs it)."""
    closed = closed_port_endpoint()
    env = {**os.environ, "HF_ENDPOINT": closed, "HF_TOKEN": "hf_fake", "HF_HUB_OFFLINE": "0"}
    env.update(HF_HOME=str(tmp_path / "hf-home"), HF_HUB_DISABLE_PROGRESS_BARS="1")
    env.pop("HF_HUB_VERBOSITY", None)
    command = [sys.executable, "-m", "pipeline.cli", "push", str(output), REPO_ID]
    started = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started < 15
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: cannot reach the Hub at {closed}: ")


def test_the_clients_retry_lines_stay_off_the_terminal(
    output: Path, hub: HubStandIn, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A listing the Hub answers 503 once is retried by the client, which logs a warning
    for each try: none of it is shown, the push still succeeds."""
    monkeypatch.setattr(huggingface_hub.utils._http.time, "sleep", lambda seconds: None)
    hub.fail("tree", 503)
    with caplog.at_level(logging.DEBUG):
        result = push(output)
    assert result.exit_code == 0, result.output
    assert [r.route for r in hub.requests if r.status == 503] == ["tree"]
    assert not [r for r in caplog.records if r.name.startswith("huggingface_hub")]
    assert "Retrying" not in result.output and "thrown while requesting" not in result.output


def test_a_big_output_goes_in_several_commits_the_manifest_last_and_resumes(
    output: Path, hub: HubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of BATCH_FILES files (3 here): the repository shows no manifest until every
    file it lists is there, and a push stopped between batches sends only the rest."""
    monkeypatch.setattr(pipeline.jobs.push, "BATCH_FILES", 3)
    hub.fail("commit", status=500, times=1, skip=2)  # the third commit fails
    with pytest.raises(PushError):
        push_output(output, REPO_ID, token="hf_fake")
    partial = hub.commits(REPO_ID)
    assert len(partial) == 3 and "manifest.json" not in partial[-1].files
    sent = len(hub.uploads)
    result = push_output(output, REPO_ID, token="hf_fake")
    files = manifest_files(output)
    batches = -(-(len(files) - 2) // 3)  # the card and the manifest go in their own commit
    assert len(partial) - 1 + len(result.commits) == batches + 1
    final = hub.commits(REPO_ID)[-1].files
    assert set(final) >= files and "manifest.json" in final
    resent = {upload.name for upload in hub.uploads[sent:]}
    done = {path for commit in partial for path in commit.files}
    assert not resent & (done - {"README.md", "manifest.json", ".gitattributes"})
    assert sum(upload.kind == "lfs" for upload in hub.uploads) == 2  # each shard sent once


def test_a_preference_output_is_published_and_loads_as_pairs(
    hub: HubStandIn, tmp_path: Path
) -> None:
    """A run with `objective: preference` publishes its pair rows and a card
    that says how to train on them."""
    config = tmp_path / "pairs.yaml"
    config.write_text(
        "name: pairs\ninputs:\n"
        f"  - path: {REPO / 'data_samples' / 'openai' / 'preference.jsonl'}\n"
        f"  - path: {REPO / 'data_samples' / 'hh-rlhf' / 'pairs.jsonl'}\n"
        f"output: {tmp_path / 'pairs'}\nstages:\n  lint: {{fail_on: never}}\n"
        f"  tokenize: {{tokenizer: {REPO / 'configs' / 'sample_tokenizer'}, objective: preference}}\n"
        "  shard: {splits: {train: 1.0}}\n"
    )
    made = CliRunner().invoke(main, ["run", str(config)])
    assert made.exit_code == 0, made.output
    out = tmp_path / "pairs"
    result = push(out)
    assert result.exit_code == 0, result.output
    copy = tmp_path / "copy"
    hub.materialize(REPO_ID, copy, repo_type="dataset")
    loaded = datasets.load_dataset(str(copy), cache_dir=str(tmp_path / "cache"))["train"]
    local = pq.read_table(sorted((out / "data").glob("*.parquet")))
    assert loaded["chosen_ids"] == local["chosen_ids"].to_pylist()
    assert {"prompt_ids", "rejected_ids", "rejected_labels"} <= set(loaded.column_names)
    card = (copy / "README.md").read_text(encoding="utf-8")
    assert "pretokenized(DPOTrainer)" in card and f'load_dataset("{REPO_ID}"' in card
