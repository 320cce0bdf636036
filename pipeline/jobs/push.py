"""`mms push`: an output folder to a Hugging Face Hub dataset repository. Nothing leaves
before the output passes `mms verify`'s file checks (shards against the manifest's sha256
and row counts, every other listed file's sha256, the card against the files, the gate
passed, no empty split) and holds nothing the manifest does not list. Files that already
match the remote are not sent, and an output that matches it entirely makes no commit.

Through `huggingface_hub` only: `create_commit` of the files that differ, in batches of
`BATCH_FILES`: one commit for an output of up to that many files, several for a bigger one,
the card and the manifest in the last, so that a repository shows a manifest only once
every file it lists is there. An interrupted push sent again sends only what the remote
lacks (its LFS objects too: the Hub answers that it has them; with Xet, the chunks)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from pipeline.hub_ids import repo_id_problem
from pipeline.jobs.verify import OutputError, verify_output
from pipeline.output.card import card_for_repository
from pipeline.output.folder import WORK_DIR

MANIFEST = "manifest.json"
CARD = "README.md"
OWNED = ("data/", "tokenizer/", "reports/", "quarantine/")
"""The repository folders an output fills: a remote file there that the output does not
have (a shard of an earlier push) is deleted; other remote files (.gitattributes, files a
user added) are left alone."""
BATCH_FILES = 200
"""Files per commit of a big push."""
REPO_TYPE = "dataset"
CHUNK_BYTES = 1 << 20


class PushError(RuntimeError):
    """The output cannot be pushed (the message says why), or the Hub refused it."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or []


@dataclass(frozen=True, slots=True)
class LocalFile:
    """A file the push publishes: its path in the repository, size, sha256 and git blob
    id (how the Hub names a file it does not keep in LFS), and the bytes to send when they
    are not the file's own (the card, named for the repository)."""

    path: str
    size: int
    sha256: str
    blob_id: str
    content: bytes | None = None


@dataclass
class PushPlan:
    """What a push would do: every file with whether the remote already has it, and the
    remote files in the output's folders that it would delete."""

    output: Path
    repo_id: str
    revision: str
    files: list[LocalFile]
    same: set[str] = field(default_factory=set)
    stale: list[str] = field(default_factory=list)
    repo_exists: bool = False

    @property
    def to_send(self) -> list[LocalFile]:
        return [file for file in self.files if file.path not in self.same]

    @property
    def up_to_date(self) -> bool:
        return not self.to_send and not self.stale


@dataclass
class PushResult:
    """The plan and what the push did: the commits made (none: dry run or up to date)."""

    plan: PushPlan
    commits: list[str] = field(default_factory=list)
    pull_request: str | None = None


def publishable_files(out: Path, repo_id: str) -> list[LocalFile]:
    """The files of `out` a push publishes, after the checks of the module docstring;
    PushError names every problem found."""
    if not (out / MANIFEST).is_file():
        raise PushError(f"{out} has no {MANIFEST}: it is not an output of mms run or mms pack")
    if (out / WORK_DIR).exists():
        raise PushError(
            f"{out / WORK_DIR} is the work directory of an unfinished command: run it again "
            "to the end before pushing (`mms run CONFIG` resumes it, or says the output is "
            "finished and removes it)"
        )
    try:
        checked = verify_output(out, render=False, template=False)
    except OutputError as err:
        raise PushError(str(err)) from None
    if not checked.passed:
        problems = [f"{problem.where}: {problem.what}" for problem in checked.problems]
        raise PushError("the output does not match its manifest", problems)
    manifest = orjson.loads((out / MANIFEST).read_bytes())
    listed = _listed(manifest)
    extra = sorted(path for path in _files_under(out) if path not in listed)
    if extra:
        raise PushError("the output holds files its manifest does not list", extra)
    files = [_local(out, path) for path in sorted(listed - {CARD, MANIFEST})]
    card = card_for_repository((out / CARD).read_text(encoding="utf-8"), out.name, repo_id)
    return [*files, _local(out, CARD, card.encode("utf-8")), _local(out, MANIFEST)]


def plan_push(api: Any, out: Path, repo_id: str, revision: str | None = None) -> PushPlan:
    """Compare the output's files with the repository at `revision` (default: main)."""
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    files = publishable_files(out, repo_id)
    plan = PushPlan(out, repo_id, revision or "main", files)
    _first_contact(api, repo_id, plan.revision)
    try:
        remote = list(
            api.list_repo_tree(repo_id, repo_type=REPO_TYPE, revision=plan.revision, recursive=True)
        )
        plan.repo_exists = True
    except RevisionNotFoundError:
        plan.repo_exists = True
        return plan
    except RepositoryNotFoundError:
        return plan
    remote_files = {entry.path: entry for entry in remote if hasattr(entry, "blob_id")}
    for file in files:
        entry = remote_files.get(file.path)
        if entry is not None and _matches(file, entry):
            plan.same.add(file.path)
    local = {file.path for file in files}
    plan.stale = sorted(
        path for path in remote_files if path.startswith(OWNED) and path not in local
    )
    return plan


def push_output(
    out: str | os.PathLike[str],
    repo_id: str,
    *,
    token: str | None = None,
    private: bool = False,
    revision: str | None = None,
    create_pr: bool = False,
    message: str | None = None,
    dry_run: bool = False,
    endpoint: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PushResult:
    """Push the output folder `out` to the dataset repository `repo_id` (see the module
    docstring); with `dry_run`, only say what would be sent. `token` defaults to HF_TOKEN
    or the cached login; `endpoint` to the Hub's (HF_ENDPOINT)."""
    from huggingface_hub import HfApi, get_token
    from huggingface_hub.errors import HfHubHTTPError

    out = Path(out)
    problem = repo_id_problem(repo_id, owner=True)
    if problem is not None:
        raise PushError(f"{repo_id!r} is not a Hub repository id like ORG/NAME: {problem}")
    if not dry_run and not (token or get_token()):
        raise PushError("no Hub token: pass --token, set HF_TOKEN, or log in with `hf auth login`")
    api = HfApi(endpoint=endpoint, token=token)
    try:
        plan = plan_push(api, out, repo_id, revision)
        result = PushResult(plan)
        if dry_run or plan.up_to_date:
            return result
        api.create_repo(repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True)
        if plan.revision != "main":
            api.create_branch(repo_id, repo_type=REPO_TYPE, branch=plan.revision, exist_ok=True)
        batches = list(_batches(plan, single=create_pr))
        for done, operations in enumerate(batches, 1):
            info = api.create_commit(
                repo_id,
                operations,
                commit_message=_message(message, done, len(batches)),
                repo_type=REPO_TYPE,
                revision=plan.revision,
                create_pr=create_pr,
            )
            result.commits.append(info.oid)
            result.pull_request = info.pr_url or result.pull_request
            if progress is not None:
                progress(done, len(batches))
    except HfHubHTTPError as err:
        raise PushError(f"the Hub refused: {_first_line(err)}") from None
    except Exception as err:
        if not _unreachable(err):
            raise
        raise PushError(f"cannot reach the Hub at {api.endpoint}: {_first_line(err)}") from None
    return result


def _first_contact(api: Any, repo_id: str, revision: str) -> None:
    """Reach the Hub once without the client's retries (repo_info is a single request), so
    that an endpoint refusing connections, a host that does not resolve or one that does not
    answer fails now, not after the client's backoff (list_repo_tree retries 5 times over
    23 s). The requests that follow keep their retries, for a network that falters
    mid-push; whatever the Hub answers here is left to them to act on."""
    from huggingface_hub.errors import HfHubHTTPError

    try:
        api.repo_info(repo_id, repo_type=REPO_TYPE, revision=revision)
    except HfHubHTTPError:
        return


def _batches(plan: PushPlan, *, single: bool) -> Iterator[list[Any]]:
    """The commits' operations: the data and other files in batches, then the card, the
    manifest and the deletions (one commit in all for a pull request)."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    def add(file: LocalFile) -> Any:
        source = file.content if file.content is not None else str(plan.output / file.path)
        return CommitOperationAdd(path_in_repo=file.path, path_or_fileobj=source)

    sending = plan.to_send
    body = [add(file) for file in sending if file.path not in (CARD, MANIFEST)]
    last = [add(file) for file in sending if file.path in (CARD, MANIFEST)]
    last += [CommitOperationDelete(path_in_repo=path) for path in plan.stale]
    if single or len(body) <= BATCH_FILES:
        yield body + last
        return
    for start in range(0, len(body), BATCH_FILES):
        yield body[start : start + BATCH_FILES]
    if last:
        yield last


def _message(message: str | None, done: int, total: int) -> str:
    text = message or "Upload an mms-pipeline output"
    return text if total == 1 else f"{text} ({done}/{total})"


def _listed(manifest: dict[str, Any]) -> set[str]:
    """Every file the manifest lists, with the card and the manifest itself."""
    listed = {CARD, MANIFEST}
    for split in manifest.get("splits", {}).values():
        listed.update(shard["path"] for shard in split.get("shards", []))
    listed.update(entry["path"] for entry in manifest.get("files", []))
    tokenizer = manifest.get("tokenizer")
    if tokenizer:
        listed.add(tokenizer["path"])
    listed.update(manifest.get("reports", []))
    return listed


def _files_under(out: Path) -> Iterator[str]:
    """Every file under `out` (relative, POSIX)."""
    for directory, _, names in os.walk(out):
        relative = Path(directory).relative_to(out).as_posix()
        for name in names:
            yield name if relative == "." else f"{relative}/{name}"


def _local(out: Path, path: str, content: bytes | None = None) -> LocalFile:
    """A file's identity (sha256, and git's blob sha1), read in chunks: shards are big."""
    size = len(content) if content is not None else (out / path).stat().st_size
    sha256 = hashlib.sha256()
    blob = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False)
    for chunk in _chunks(out / path, content):
        sha256.update(chunk)
        blob.update(chunk)
    return LocalFile(path, size, sha256.hexdigest(), blob.hexdigest(), content)


def _chunks(path: Path, content: bytes | None) -> Iterator[bytes]:
    if content is not None:
        yield content
        return
    with open(path, "rb") as source:
        while chunk := source.read(CHUNK_BYTES):
            yield chunk


def _matches(file: LocalFile, remote: Any) -> bool:
    """Whether a remote file (a RepoFile of list_repo_tree) has the local file's bytes."""
    lfs = getattr(remote, "lfs", None)
    if lfs is not None:
        return bool(lfs.sha256 == file.sha256)
    return bool(remote.blob_id == file.blob_id)


def _unreachable(err: Exception) -> bool:
    """Whether `err` says the Hub could not be reached (the HTTP client's transport errors,
    whichever client huggingface_hub uses, or the operating system's)."""
    client = type(err).__module__.split(".")[0]
    return isinstance(err, OSError) or client in ("httpx", "httpx2", "requests", "urllib3")


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
