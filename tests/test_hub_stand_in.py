"""The Hub stand-in (tests/hub_stand_in.py) driven by the real `huggingface_hub` client over
loopback: repos, inline and LFS commits, listings, downloads, branches, pull requests,
resumed uploads, and a materialized repo that `datasets` loads."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

from tests.hub_stand_in import TOKEN, HubStandIn, git_blob_oid, point_client_at

REPO = "me/tiny"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubStandIn]:
    """A running stand-in with the client pointed at it, Xet off."""
    with HubStandIn() as server:
        point_client_at(monkeypatch, tmp_path, server.endpoint, xet=False)
        yield server
        assert server.unhandled == [], server.unhandled
        assert server.errors == [], server.errors


@pytest.fixture
def api(hub: HubStandIn) -> HfApi:
    return HfApi(endpoint=hub.endpoint, token=TOKEN)


def write_parquet(path: Path, rows: list[dict[str, object]]) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path.read_bytes()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A tiny dataset folder: one Parquet shard (LFS) and a README (regular)."""
    root = tmp_path / "ds"
    write_parquet(root / "data" / "train-00000-of-00001.parquet", [{"id": i} for i in range(5)])
    (root / "README.md").write_text("# tiny\n")
    return root


def lfs_uploads(hub: HubStandIn) -> list[str]:
    return [upload.name for upload in hub.uploads if upload.kind == "lfs"]


def test_upload_folder_then_read_back(
    hub: HubStandIn, api: HfApi, folder: Path, tmp_path: Path
) -> None:
    api.create_repo(REPO, repo_type="dataset", private=True, exist_ok=True)
    api.create_repo(REPO, repo_type="dataset", private=True, exist_ok=True)  # 409, accepted
    info = api.upload_folder(repo_id=REPO, folder_path=folder, repo_type="dataset")

    shard = "data/train-00000-of-00001.parquet"
    shard_bytes = (folder / shard).read_bytes()
    assert hub.repo(REPO).private
    assert [c.title for c in hub.commits(REPO)] == [
        "initial commit",
        "Upload folder using huggingface_hub",
    ]
    assert hub.commits(REPO)[-1].lfs == {shard}
    routes = [r.route for r in hub.requests]
    assert (
        routes.count("lfs_batch") == routes.count("lfs_upload") == routes.count("lfs_verify") == 1
    )
    assert [(u.kind, u.size) for u in hub.uploads] == [
        ("lfs", len(shard_bytes)),
        ("inline", len(b"# tiny\n")),
    ]

    assert sorted(api.list_repo_files(REPO, repo_type="dataset")) == [
        ".gitattributes",
        "README.md",
        shard,
    ]
    assert api.repo_info(REPO, repo_type="dataset").sha == info.oid == hub.commits(REPO)[-1].oid
    tree = {e.path: e for e in api.list_repo_tree(REPO, repo_type="dataset", recursive=True)}
    assert tree[shard].lfs is not None and tree[shard].lfs.size == len(shard_bytes)
    assert tree["README.md"].blob_id == git_blob_oid(b"# tiny\n") and tree["README.md"].lfs is None
    assert type(tree["data"]).__name__ == "RepoFolder"
    top = [e.path for e in api.list_repo_tree(REPO, repo_type="dataset")]
    assert top == ["data", ".gitattributes", "README.md"]
    [entry] = api.get_paths_info(REPO, [shard, "missing.txt"], repo_type="dataset", expand=True)
    assert entry.last_commit is not None and entry.last_commit.oid == info.oid

    cache = tmp_path / "cache"
    got = hf_hub_download(
        REPO, shard, repo_type="dataset", cache_dir=cache, token=TOKEN, endpoint=hub.endpoint
    )
    assert Path(got).read_bytes() == shard_bytes
    snapshot = snapshot_download(
        REPO, repo_type="dataset", cache_dir=cache, token=TOKEN, endpoint=hub.endpoint
    )
    assert (Path(snapshot) / "README.md").read_text() == "# tiny\n"

    hub.materialize(REPO, tmp_path / "out")
    assert (tmp_path / "out" / shard).read_bytes() == shard_bytes


def test_private_repo_needs_a_token(hub: HubStandIn, api: HfApi) -> None:
    api.create_repo(REPO, repo_type="dataset", private=True)
    anonymous = HfApi(endpoint=hub.endpoint, token=False)
    with pytest.raises(RepositoryNotFoundError):
        anonymous.repo_info(REPO, repo_type="dataset")


def test_pushing_twice_makes_one_commit(hub: HubStandIn, api: HfApi, folder: Path) -> None:
    api.create_repo(REPO, repo_type="dataset")
    first = api.upload_folder(repo_id=REPO, folder_path=folder, repo_type="dataset")
    sent = list(hub.uploads)
    second = api.upload_folder(repo_id=REPO, folder_path=folder, repo_type="dataset")
    assert second.oid == first.oid
    assert len(hub.commits(REPO)) == 2  # initial commit + one push
    assert hub.uploads == sent  # nothing re-sent: preupload's oids matched


def test_server_records_a_commit_that_changes_nothing(hub: HubStandIn, api: HfApi) -> None:
    """The client never sends an empty commit; the Hub records one if it gets it, and so
    does the stand-in (raw HTTP here)."""
    api.create_repo(REPO, repo_type="dataset")
    header = {"key": "header", "value": {"summary": "nothing", "description": ""}}
    request = urllib.request.Request(
        f"{hub.endpoint}/api/datasets/{REPO}/commit/main",
        data=json.dumps(header).encode() + b"\n",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-ndjson"},
        method="POST",
    )
    with urllib.request.urlopen(request) as response:
        answer = json.load(response)
    commits = hub.commits(REPO)
    assert [c.title for c in commits] == ["initial commit", "nothing"]
    assert answer["commitOid"] == commits[-1].oid and commits[-1].files == commits[0].files


def test_branch_and_pull_request(hub: HubStandIn, api: HfApi, tmp_path: Path) -> None:
    api.create_repo(REPO, repo_type="dataset")
    api.create_branch(REPO, repo_type="dataset", branch="dev")
    api.create_commit(
        REPO,
        repo_type="dataset",
        revision="dev",
        operations=[CommitOperationAdd("notes.txt", b"on dev\n")],
        commit_message="dev only",
    )
    assert "notes.txt" not in api.list_repo_files(REPO, repo_type="dataset")
    assert "notes.txt" in api.list_repo_files(REPO, repo_type="dataset", revision="dev")

    pr = api.create_commit(
        REPO,
        repo_type="dataset",
        operations=[CommitOperationAdd("pr.parquet", write_parquet(tmp_path / "p.parquet", []))],
        commit_message="proposal",
        create_pr=True,
    )
    assert pr.pr_url == f"{hub.endpoint}/datasets/{REPO}/discussions/1"
    assert pr.pr_revision == "refs/pr/1" and pr.pr_num == 1
    assert "pr.parquet" not in api.list_repo_files(REPO, repo_type="dataset")
    path = hf_hub_download(
        REPO,
        "pr.parquet",
        repo_type="dataset",
        revision="refs/pr/1",
        cache_dir=tmp_path / "cache",
        token=TOKEN,
        endpoint=hub.endpoint,
    )
    assert Path(path).read_bytes() == (tmp_path / "p.parquet").read_bytes()

    refs = api.list_repo_refs(REPO, repo_type="dataset", include_pull_requests=True)
    assert sorted(b.name for b in refs.branches) == ["dev", "main"]
    assert [(p.ref, p.target_commit) for p in refs.pull_requests or []] == [("refs/pr/1", pr.oid)]
    commits = api.list_repo_commits(REPO, repo_type="dataset", revision="refs/pr/1")
    assert [c.title for c in commits] == ["proposal", "initial commit"]


def test_interrupted_upload_resumes_without_resending(
    hub: HubStandIn, api: HfApi, folder: Path, tmp_path: Path
) -> None:
    """The commit fails once after the LFS bytes went up; the rerun sends no LFS bytes again
    (the batch answer has no upload action for objects the repo has) and commits once."""
    write_parquet(folder / "data" / "extra.parquet", [{"id": 99}])
    api.create_repo(REPO, repo_type="dataset")
    hub.fail("commit", status=500)
    with pytest.raises(HfHubHTTPError):
        api.upload_folder(repo_id=REPO, folder_path=folder, repo_type="dataset")
    assert len(lfs_uploads(hub)) == 2 and len(hub.commits(REPO)) == 1

    api.upload_folder(repo_id=REPO, folder_path=folder, repo_type="dataset")
    assert len(lfs_uploads(hub)) == 2
    assert len(hub.commits(REPO)) == 2
    assert sorted(hub.commits(REPO)[-1].lfs) == [
        "data/extra.parquet",
        "data/train-00000-of-00001.parquet",
    ]


def test_materialized_repo_loads_with_datasets(
    hub: HubStandIn, api: HfApi, folder: Path, tmp_path: Path
) -> None:
    import datasets

    api.create_repo(REPO, repo_type="dataset")
    api.upload_folder(repo_id=REPO, folder_path=folder, repo_type="dataset")
    dest = hub.materialize(REPO, tmp_path / "materialized")
    loaded = datasets.load_dataset(str(dest), split="train", cache_dir=str(tmp_path / "ds-cache"))
    assert loaded["id"] == [0, 1, 2, 3, 4]


def test_xet_pipeline_with_regular_files_resumes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With Xet on, upload_folder runs the streamed multi-commit pipeline (the successor of
    upload_large_folder). It needs no Xet storage when every file is regular: 260 files
    commit as 250 + 10; the second commit fails, the rerun skips the committed 250."""
    root = tmp_path / "many"
    root.mkdir()
    for n in range(260):
        (root / f"f{n:03d}.txt").write_text(f"{n}\n")
    with HubStandIn(lfs_suffixes=(), lfs_threshold=None) as hub:
        point_client_at(monkeypatch, tmp_path, hub.endpoint, xet=True)
        api = HfApi(endpoint=hub.endpoint, token=TOKEN)
        api.create_repo(REPO, repo_type="dataset")
        hub.fail("commit", status=400, skip=1)
        with pytest.raises(HfHubHTTPError):
            api.upload_folder(repo_id=REPO, folder_path=root, repo_type="dataset")
        assert len(hub.commits(REPO)) == 2 and len(hub.commits(REPO)[-1].files) == 251
        sent = len(hub.uploads)
        assert sent == 250 + 10  # the failed commit's payload crossed the wire too

        api.upload_folder(repo_id=REPO, folder_path=root, repo_type="dataset")
        assert len(hub.uploads) - sent == 10
        assert [c.title for c in hub.commits(REPO)] == [
            "initial commit",
            "Upload folder using huggingface_hub",
            "Upload folder using huggingface_hub",
        ]
        assert len(hub.commits(REPO)[-1].files) == 261
        assert not [r for r in hub.requests if r.route in ("xet_token", "lfs_batch")]
        assert hub.unhandled == [] and hub.errors == []
