"""A local stand-in for the Hugging Face Hub HTTP API, so tests can drive the real
`huggingface_hub` client (written against 2.4.0) over the loopback address: create repos,
commit (inline and LFS files), branch, open pull requests, list, and download.

    with HubStandIn() as hub:
        api = HfApi(endpoint=hub.endpoint, token="hf_fake")
        api.create_repo("me/ds", repo_type="dataset")
        api.upload_folder(repo_id="me/ds", folder_path=folder, repo_type="dataset")
        hub.commits("me/ds"), hub.uploads, hub.materialize("me/ds", dest)

State lives in memory: `repos[(repo_type, repo_id)]` holds each repo's refs (`branches`:
"main", other branches and "refs/pr/N", each its own list of `Commit`s, oldest first, every
commit a full snapshot `files: path -> bytes` plus which paths are LFS) and its LFS objects by
sha256. `uploads` lists the file bytes the client sent, whatever the answer (one `Upload`
per LFS PUT and per inline file of a commit payload), `requests` every request with the
route it hit and the status answered, `unhandled` the requests no route matched, `errors`
the tracebacks of the stand-in's own bugs (answered 500). `fail(route, ...)` makes a route
answer an error a given number of times, for interrupted uploads. As on the Hub, a new repo
starts with an "initial commit" holding .gitattributes, and a commit to a branch that does not
exist is answered 404 RevisionNotFound (create it with `create_branch` first).

What the client decides on its own (read in huggingface_hub 2.4.0):

- Xet. `_commit_api._upload_files` uploads through Xet whenever `is_xet_available()`, that is
  `hf_xet` is installed and `constants.HF_HUB_DISABLE_XET` is false; no server answer turns
  it off (there is no negotiation, the LFS batch endpoint is not even called). The stand-in
  has no Xet storage, so a test uploading LFS files must set
  `huggingface_hub.constants.HF_HUB_DISABLE_XET = True` (the `HF_HUB_DISABLE_XET` variable is
  read once, at import). Then LFS goes through the basic transfer below. The xet token routes
  answer 501 with a message saying so, and show up in `requests`.
- `upload_large_folder` does not exist in 2.4.0. Its resumable multi-commit upload became
  `upload_folder`'s streamed pipeline (`_upload_pipeline.py`), which only runs with Xet on;
  with Xet off, `upload_folder` is one `create_commit`. That one commit is still resumable in
  the way that matters: the LFS batch answer leaves out the upload action for objects the
  repo already has, and the preupload answer carries each file's remote oid so unchanged
  files drop out of the commit. The pipeline itself can run against the stand-in if every
  file is regular (`HubStandIn(lfs_suffixes=(), lfs_threshold=None)`, Xet left on): it then
  needs no Xet call and commits in batches of 250 files.
- Unchanged files are dropped client-side (preupload `oid` against the local oid: git sha1
  for regular files, sha256 for LFS), and a commit with nothing left is not sent: the client
  answers with `repo_info().sha`. A commit that does reach the server is always recorded,
  even if it changes nothing, as the Hub does (huggingface_hub issue #1411).
- URLs. `HfApi(endpoint=...)` needs nothing else. `hf_hub_download` builds its URL from
  `constants.HUGGINGFACE_CO_URL_TEMPLATE` (fixed at import) and swaps in its `endpoint=`
  argument only where that URL starts with `constants.ENDPOINT`: patch both constants or
  neither (and pass `endpoint=`), never `ENDPOINT` alone.
- Telemetry. Building the user agent fetches `{ENDPOINT}/api/agent-harnesses` once per
  process and caches a successful answer in `constants.AGENT_HARNESSES_PATH` (under the
  HF_HOME seen at import); the stand-in answers 404 so nothing is cached.

Endpoints (`{t}` is models, datasets or spaces; `{p}` the URL prefix "", "datasets/",
"spaces/"; revisions are one URL-quoted segment, e.g. refs%2Fpr%2F1; a revision is a branch,
refs/heads/NAME, refs/pr/N or a commit oid or its prefix of 7+ hex digits):

    POST   /api/repos/create                      create_repo (409 if it exists)
    DELETE /api/repos/delete                      delete_repo
    GET    /api/whoami-v2                         whoami
    GET    /api/agent-harnesses                   404 on purpose (client telemetry, see the route)
    POST   /api/validate-yaml                     README.md check made by create_commit
    GET    /api/{t}/{repo}[/revision/{rev}]       repo_info (sha, siblings; ?blobs=1 sizes)
    POST   /api/{t}/{repo}/preupload/{rev}        uploadMode lfs|regular, remote oid
    POST   /{p}{repo}.git/info/lfs/objects/batch  LFS batch, transfer "basic"
    PUT    /__stand_in/lfs/{t}/{repo}/{oid}       the upload href (no auth, like a signed URL)
    POST   /__stand_in/lfs/{t}/{repo}/{oid}/verify
    POST   /api/{t}/{repo}/commit/{rev}           NDJSON commit, ?create_pr=1
    GET    /api/{t}/{repo}/tree/{rev}[/{path}]    list_repo_tree / list_repo_files
    POST   /api/{t}/{repo}/paths-info/{rev}       get_paths_info (form or JSON body)
    GET    /api/{t}/{repo}/commits/{rev}          list_repo_commits (newest first)
    GET    /api/{t}/{repo}/refs                   list_repo_refs (?include_prs=1)
    POST   /api/{t}/{repo}/branch/{branch}        create_branch (startingPoint), DELETE too
    POST   /api/{t}/{repo}/discussions            create_pull_request / create_discussion
    GET    /api/{t}/{repo}/discussions/{num}      get_discussion_details
    HEAD   /{p}{repo}/resolve/{rev}/{path}        file metadata (ETag, X-Repo-Commit, ...)
    GET    /{p}{repo}/resolve/{rev}/{path}        file bytes (single "bytes=a-b" ranges too)

Not reproduced:

- Auth is only "an Authorization header is present": writes without one get 401, private
  repos read without one get 401 RepoNotFound. Tokens are not checked, there are no users,
  organizations, permissions, scopes or gated repos; every repo without a namespace lands
  in "stand-in-user", every commit is authored by it.
- Xet storage (no CAS, no xet tokens, no X-Xet-Hash on downloads), LFS multipart and
  the multipart completion, LFS download through the batch API, and the CDN redirect: the
  resolve route serves LFS bytes itself with X-Linked-Etag and X-Linked-Size.
- Which files go to LFS is a fixed rule (a path suffix in `lfs_suffixes` or more bytes than
  `lfs_threshold`), not the Hub's .gitattributes and binary sniffing; .gitattributes is
  never edited; .gitignore is not applied (`shouldIgnore` is always false).
- Git itself: commit and tree oids are sha1 digests of the stand-in's own records, not
  git objects (file blob oids are real: git's blob sha1 of the content, or of the LFS
  pointer); no merges, no tags, no squash, no PR merge or status changes, no commit
  copies (CommitOperationCopy is untested), no diff in discussion details, no conflicts.
- Rate limits, quotas, size limits on commits or files, the 256-file preupload limit,
  pagination (every listing is one page, no Link header), the dataset viewer, Parquet
  conversion, card metadata validation (validate-yaml accepts everything), webhooks,
  Spaces hardware.
- Persistence: everything is lost when the context exits.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import threading
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

import huggingface_hub.constants as constants
import pytest

USER = "stand-in-user"
TOKEN = "hf_fake"
"""The token tests give the client (any non-empty token is accepted)."""
URL_PREFIXES = {"model": "", "dataset": "datasets/", "space": "spaces/"}
API_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
DEFAULT_LFS_THRESHOLD = 10 * 1024 * 1024

_TYPES = r"(?P<types>models|datasets|spaces)"
_REPO = r"(?P<repo>[^/]+/[^/]+)"
_REV = r"(?P<rev>[^/]+)"
_API_REPO = rf"/api/{_TYPES}/{_REPO}"
_WEB_REPO = r"/(?:(?P<prefix>datasets|spaces)/)?" + _REPO
_ROUTES: list[tuple[str, str, re.Pattern[str]]] = [
    (method, name, re.compile(pattern + r"\Z"))
    for method, name, pattern in [
        ("POST", "create_repo", r"/api/repos/create"),
        ("DELETE", "delete_repo", r"/api/repos/delete"),
        ("GET", "whoami", r"/api/whoami-v2"),
        ("POST", "validate_yaml", r"/api/validate-yaml"),
        ("GET", "agent_harnesses", r"/api/agent-harnesses"),
        ("GET", "repo_info", rf"{_API_REPO}(?:/revision/{_REV})?"),
        ("POST", "preupload", rf"{_API_REPO}/preupload/{_REV}"),
        ("POST", "commit", rf"{_API_REPO}/commit/{_REV}"),
        ("GET", "tree", rf"{_API_REPO}/tree/{_REV}(?:/(?P<path>.+))?"),
        ("POST", "paths_info", rf"{_API_REPO}/paths-info/{_REV}"),
        ("GET", "commits", rf"{_API_REPO}/commits/{_REV}"),
        ("GET", "refs", rf"{_API_REPO}/refs"),
        ("POST", "create_branch", rf"{_API_REPO}/branch/(?P<branch>[^/]+)"),
        ("DELETE", "delete_branch", rf"{_API_REPO}/branch/(?P<branch>[^/]+)"),
        ("POST", "create_discussion", rf"{_API_REPO}/discussions"),
        ("GET", "discussion", rf"{_API_REPO}/discussions/(?P<num>\d+)"),
        ("GET", "xet_token", rf"{_API_REPO}/xet-(?:read|write)-token(?:/.*)?"),
        ("POST", "lfs_batch", rf"{_WEB_REPO}\.git/info/lfs/objects/batch"),
        ("PUT", "lfs_upload", rf"/__stand_in/lfs/{_TYPES}/{_REPO}/(?P<oid>[0-9a-f]{{64}})"),
        ("POST", "lfs_verify", rf"/__stand_in/lfs/{_TYPES}/{_REPO}/(?P<oid>[0-9a-f]{{64}})/verify"),
        ("HEAD", "resolve", rf"{_WEB_REPO}/resolve/{_REV}/(?P<path>.+)"),
        ("GET", "resolve", rf"{_WEB_REPO}/resolve/{_REV}/(?P<path>.+)"),
    ]
]


def git_blob_oid(data: bytes) -> str:
    """Git's object id for a blob with this content (what the Hub reports as a file's oid)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def lfs_pointer(data: bytes) -> bytes:
    """The git-lfs pointer file that stands in git for an LFS file with this content."""
    sha = hashlib.sha256(data).hexdigest()
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(data)}\n".encode()
    )


def _now() -> str:
    """Now in the one date format the client parses: 2024-01-02T03:04:05.678Z."""
    moment = datetime.now(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class Commit:
    """One commit: a full snapshot of the repo's files, and which of them are LFS files."""

    oid: str
    title: str
    message: str
    files: dict[str, bytes]
    lfs: frozenset[str]
    date: str
    parent: str | None


@dataclass
class PullRequest:
    """A discussion; pull requests have a ref `refs/pr/{num}` in the repo's branches."""

    num: int
    title: str
    is_pull_request: bool
    base: str
    status: str
    created_at: str


@dataclass
class Repo:
    """A repository: refs (branches and refs/pr/N) to commit histories, and LFS objects."""

    repo_type: str
    repo_id: str
    private: bool
    created_at: str
    branches: dict[str, list[Commit]] = field(default_factory=dict)
    lfs_objects: dict[str, bytes] = field(default_factory=dict)
    discussions: dict[int, PullRequest] = field(default_factory=dict)

    def head(self, ref: str = "main") -> Commit:
        """The last commit of a branch or PR ref."""
        return self.branches[ref][-1]


class Upload(NamedTuple):
    """File bytes the client sent: an LFS PUT (name is the sha256) or an inline file (path)."""

    kind: str
    name: str
    size: int


class Request(NamedTuple):
    """A request the server answered, with the route it matched (None if none did)."""

    method: str
    path: str
    route: str | None
    status: int


@dataclass
class _Failure:
    """An injected error: skip the first `skip` matching requests, then fail `times` of them."""

    route: str
    status: int
    times: int
    skip: int


@dataclass(frozen=True)
class _Call:
    """What a route sees of a request: URL parts (unquoted), query, token, body, headers
    (lower-case names)."""

    params: dict[str, str]
    query: dict[str, str]
    token: str | None
    body: bytes
    headers: dict[str, str]


@dataclass
class _Reply:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class HubError(Exception):
    """An error answer, with the X-Error-Code the client turns into a typed exception."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or {}
        self.body = body or {}


def _content(value: dict[str, Any]) -> bytes:
    """The bytes of a commit payload's inline file entry."""
    if value.get("encoding") == "base64":
        return base64.b64decode(value["content"])
    return str(value["content"]).encode()


def _json(data: Any, status: int = 200, content_type: str = "application/json") -> _Reply:
    return _Reply(status, json.dumps(data).encode(), {"Content-Type": content_type})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stand_in: HubStandIn


class _Handler(BaseHTTPRequestHandler):
    """Reads the request (Content-Length or chunked body), lets the stand-in answer it."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _serve(self) -> None:
        body = self._read_body()
        reply = self.server.stand_in.handle(self.command, self.path, dict(self.headers), body)
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if "Content-Length" not in reply.headers:
            self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the stand-in keeps its own `requests` log."""


class HubStandIn:
    """The server and its in-memory state; a context manager that serves on 127.0.0.1 from a
    background thread. `lfs_suffixes` and `lfs_threshold` (bytes, None for never) decide the
    preupload answer; the defaults send Parquet files and files over 10 MB through LFS."""

    def __init__(
        self,
        *,
        lfs_suffixes: tuple[str, ...] = (".parquet",),
        lfs_threshold: int | None = DEFAULT_LFS_THRESHOLD,
    ) -> None:
        self.lfs_suffixes = lfs_suffixes
        self.lfs_threshold = lfs_threshold
        self.repos: dict[tuple[str, str], Repo] = {}
        self.uploads: list[Upload] = []
        self.requests: list[Request] = []
        self.unhandled: list[Request] = []
        self.errors: list[str] = []
        self.endpoint = ""
        self._failures: list[_Failure] = []
        self._lock = threading.Lock()
        self._counter = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> HubStandIn:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stand_in = self
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},  # shutdown() waits up to one poll
            name="hub-stand-in",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    # ------------------------------------------------------------------ test helpers

    def repo(self, repo_id: str, repo_type: str = "dataset") -> Repo:
        """The stored repo (KeyError if it was never created)."""
        return self.repos[(repo_type, repo_id)]

    def commits(
        self, repo_id: str, revision: str = "main", repo_type: str = "dataset"
    ) -> list[Commit]:
        """A ref's history, oldest first; the first one is the repo's "initial commit"."""
        with self._lock:
            repo = self.repo(repo_id, repo_type)
            return self._history(repo, self._resolve(repo, revision)[1])

    def materialize(
        self, repo_id: str, dest: Path, revision: str = "main", repo_type: str = "dataset"
    ) -> Path:
        """Write the repo's files at `revision` under `dest` (a folder `datasets` can load)."""
        with self._lock:
            commit = self._resolve(self.repo(repo_id, repo_type), revision)[1]
            files = dict(commit.files)
        for path, data in files.items():
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return dest

    def fail(self, route: str, status: int = 500, times: int = 1, skip: int = 0) -> None:
        """Make `route` (a name from `_ROUTES`, e.g. "commit", "lfs_upload") answer `status`
        `times` times, after letting `skip` matching requests through."""
        with self._lock:
            self._failures.append(_Failure(route, status, times, skip))

    # ------------------------------------------------------------------ dispatch

    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> _Reply:
        """Answer one request; called by the HTTP handler thread."""
        split = urlsplit(raw_path)
        query = {key: values[-1] for key, values in parse_qs(split.query).items()}
        lower = {key.lower(): value for key, value in headers.items()}
        token = lower.get("authorization", "").removeprefix("Bearer ").strip() or None
        route, match = None, None
        for route_method, name, pattern in _ROUTES:
            if route_method == method and (match := pattern.match(split.path)):
                route = name
                break
        with self._lock:
            try:
                if route is None or match is None:
                    raise HubError(404, f"HubStandIn: no route for {method} {split.path}")
                params = {key: unquote(value) for key, value in match.groupdict().items() if value}
                call = _Call(params, query, token, body, lower)
                self._record_uploads(route, call)
                self._maybe_fail(route)
                reply = getattr(self, f"_route_{route}")(call)
            except HubError as error:
                reply = _json({"error": error.message, **error.body}, error.status)
                reply.headers["X-Error-Message"] = error.message
                if error.code:
                    reply.headers["X-Error-Code"] = error.code
                reply.headers.update(error.headers)
            except Exception:
                self.errors.append(traceback.format_exc())
                reply = _json({"error": "HubStandIn internal error"}, 500)
            record = Request(method, raw_path, route, reply.status)
            self.requests.append(record)
            if route is None:
                self.unhandled.append(record)
        return reply

    def _record_uploads(self, route: str, call: _Call) -> None:
        """Note file bytes in the request, whatever the answer will be: an LFS PUT, or the
        inline files of a commit payload."""
        if route == "lfs_upload":
            self.uploads.append(Upload("lfs", call.params["oid"], len(call.body)))
        elif route == "commit":
            for line in call.body.splitlines():
                item = json.loads(line) if line.strip() else {}
                if item.get("key") == "file":
                    value = item["value"]
                    self.uploads.append(Upload("inline", value["path"], len(_content(value))))

    def _maybe_fail(self, route: str) -> None:
        for failure in self._failures:
            if failure.route != route or failure.times <= 0:
                continue
            if failure.skip > 0:
                failure.skip -= 1
                return
            failure.times -= 1
            raise HubError(failure.status, f"HubStandIn: injected failure of {route}")

    # ------------------------------------------------------------------ state helpers

    def _lookup(self, repo_type: str, repo_id: str) -> Repo:
        repo = self.repos.get((repo_type, repo_id))
        if repo is None:
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo

    def _call_repo(self, call: _Call) -> Repo:
        """The repo named in the URL (types "datasets", or prefix "datasets" or none for models)."""
        kind = call.params.get("types") or call.params.get("prefix") or "models"
        return self._lookup(API_TYPES[kind], call.params["repo"])

    def _readable_repo(self, call: _Call) -> Repo:
        repo = self._call_repo(call)
        if repo.private and call.token is None:
            raise HubError(401, "Repository not found", "RepoNotFound")
        return repo

    def _writable_repo(self, call: _Call) -> Repo:
        if call.token is None:
            raise HubError(401, "HubStandIn: a token is required to write")
        return self._call_repo(call)

    def _resolve(self, repo: Repo, revision: str) -> tuple[str | None, Commit]:
        """(ref name or None for a commit oid, commit) for a revision, or RevisionNotFound."""
        name = revision.removeprefix("refs/heads/")
        if name in repo.branches:
            return name, repo.branches[name][-1]
        if re.fullmatch(r"[0-9a-f]{7,40}", revision):
            for history in repo.branches.values():
                for commit in history:
                    if commit.oid.startswith(revision):
                        return None, commit
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")

    def _history(self, repo: Repo, commit: Commit) -> list[Commit]:
        """The commits leading to `commit`, oldest first."""
        for history in repo.branches.values():
            for index, candidate in enumerate(history):
                if candidate.oid == commit.oid:
                    return history[: index + 1]
        return [commit]

    def _new_commit(
        self,
        parent: Commit | None,
        title: str,
        message: str,
        files: dict[str, bytes],
        lfs: set[str],
    ) -> Commit:
        self._counter += 1
        record = {
            "parent": parent.oid if parent else None,
            "title": title,
            "message": message,
            "files": {path: git_blob_oid(data) for path, data in sorted(files.items())},
            "lfs": sorted(lfs),
            "n": self._counter,
        }
        oid = hashlib.sha1(json.dumps(record).encode(), usedforsecurity=False).hexdigest()
        return Commit(
            oid, title, message, dict(files), frozenset(lfs), _now(), parent.oid if parent else None
        )

    def _is_lfs(self, path: str, size: int) -> bool:
        if path.endswith(self.lfs_suffixes) and self.lfs_suffixes:
            return True
        return self.lfs_threshold is not None and size > self.lfs_threshold

    def _repo_url(self, repo: Repo) -> str:
        return f"{self.endpoint}/{URL_PREFIXES[repo.repo_type]}{repo.repo_id}"

    def _file_entry(self, commit: Commit, path: str) -> dict[str, Any]:
        data = commit.files[path]
        if path in commit.lfs:
            pointer = lfs_pointer(data)
            return {
                "type": "file",
                "oid": git_blob_oid(pointer),
                "size": len(data),
                "path": path,
                "lfs": {
                    "oid": hashlib.sha256(data).hexdigest(),
                    "size": len(data),
                    "pointerSize": len(pointer),
                },
            }
        return {"type": "file", "oid": git_blob_oid(data), "size": len(data), "path": path}

    def _folder_entry(self, commit: Commit, path: str) -> dict[str, Any]:
        prefix = path + "/"
        inside = sorted(
            (p, git_blob_oid(d)) for p, d in commit.files.items() if p.startswith(prefix)
        )
        oid = hashlib.sha1(json.dumps(inside).encode(), usedforsecurity=False).hexdigest()
        return {"type": "directory", "oid": oid, "size": 0, "path": path}

    def _last_commit(self, repo: Repo, commit: Commit, path: str) -> dict[str, str]:
        """The latest commit up to `commit` that changed the file or folder at `path`."""

        def view(snapshot: Commit) -> list[tuple[str, bytes]]:
            return sorted(
                (p, d) for p, d in snapshot.files.items() if p == path or p.startswith(path + "/")
            )

        history = self._history(repo, commit)
        last = history[0]
        for older, newer in itertools.pairwise(history):
            if view(older) != view(newer):
                last = newer
        return {"id": last.oid, "title": last.title, "date": last.date}

    def _entries(self, repo: Repo, commit: Commit, path: str, recursive: bool) -> list[str]:
        """Paths listed by the tree route: children of `path`, or all descendants."""
        prefix = f"{path}/" if path else ""
        folders: set[str] = set()
        files: list[str] = []
        for file_path in commit.files:
            if not file_path.startswith(prefix):
                continue
            parts = file_path[len(prefix) :].split("/")
            if recursive:
                files.append(file_path)
                for depth in range(1, len(parts)):
                    folders.add(prefix + "/".join(parts[:depth]))
            elif len(parts) == 1:
                files.append(file_path)
            else:
                folders.add(prefix + parts[0])
        if path and not files and not folders:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound")
        return sorted(folders) + sorted(files)

    def _entry(self, repo: Repo, commit: Commit, path: str, expand: bool) -> dict[str, Any]:
        entry = (
            self._file_entry(commit, path)
            if path in commit.files
            else self._folder_entry(commit, path)
        )
        if expand:
            entry["lastCommit"] = self._last_commit(repo, commit, path)
        return entry

    # ------------------------------------------------------------------ routes: repos

    def _route_create_repo(self, call: _Call) -> _Reply:
        if call.token is None:
            raise HubError(401, "HubStandIn: a token is required to create a repo")
        payload = json.loads(call.body or b"{}")
        repo_type = payload.get("type") or "model"
        if repo_type not in URL_PREFIXES:
            raise HubError(400, f"Invalid repo type {repo_type}")
        repo_id = f"{payload.get('organization') or USER}/{payload['name']}"
        url = f"{self.endpoint}/{URL_PREFIXES[repo_type]}{repo_id}"
        if (repo_type, repo_id) in self.repos:
            # the client reads "url" from this answer when called with exist_ok=True
            message = f"You already created this {repo_type} repo: {repo_id}"
            raise HubError(409, message, body={"url": url})
        private = payload.get("visibility") == "private" or payload.get("private") is True
        repo = Repo(repo_type, repo_id, private, _now())
        attributes = "".join(
            f"*{s} filter=lfs diff=lfs merge=lfs -text\n" for s in self.lfs_suffixes
        )
        files = {".gitattributes": attributes.encode()}
        repo.branches["main"] = [self._new_commit(None, "initial commit", "", files, set())]
        self.repos[(repo_type, repo_id)] = repo
        return _json({"url": url, "name": repo_id, "id": repo_id})

    def _route_delete_repo(self, call: _Call) -> _Reply:
        payload = json.loads(call.body or b"{}")
        repo_id = f"{payload.get('organization') or USER}/{payload['name']}"
        if call.token is None:
            raise HubError(401, "HubStandIn: a token is required to delete a repo")
        repo = self._lookup(payload.get("type") or "model", repo_id)
        del self.repos[(repo.repo_type, repo.repo_id)]
        return _json({})

    def _route_whoami(self, call: _Call) -> _Reply:
        if call.token is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        return _json({"type": "user", "name": USER, "orgs": [], "auth": {"type": "access_token"}})

    def _route_validate_yaml(self, call: _Call) -> _Reply:
        return _json({"errors": [], "warnings": []})

    def _route_agent_harnesses(self, call: _Call) -> _Reply:
        """The client's user-agent telemetry fetches this registry and caches a successful
        answer for a day under the HF_HOME it saw at import; a 404 makes it cache nothing."""
        raise HubError(404, "HubStandIn: no agent harness registry")

    def _route_repo_info(self, call: _Call) -> _Reply:
        repo = self._readable_repo(call)
        commit = self._resolve(repo, call.params.get("rev", "main"))[1]
        blobs = call.query.get("blobs", "").lower() in ("1", "true")
        siblings = []
        for path in sorted(commit.files):
            sibling: dict[str, Any] = {"rfilename": path}
            if blobs:
                entry = self._file_entry(commit, path)
                sibling.update(size=entry["size"], blobId=entry["oid"])
                if "lfs" in entry:
                    lfs = entry["lfs"]
                    sibling["lfs"] = {
                        "size": lfs["size"],
                        "sha256": lfs["oid"],
                        "pointerSize": lfs["pointerSize"],
                    }
            siblings.append(sibling)
        return _json(
            {
                "_id": hashlib.sha1(repo.repo_id.encode(), usedforsecurity=False).hexdigest()[:24],
                "id": repo.repo_id,
                "author": repo.repo_id.split("/")[0],
                "sha": commit.oid,
                "createdAt": repo.created_at,
                "lastModified": commit.date,
                "private": repo.private,
                "gated": False,
                "disabled": False,
                "downloads": 0,
                "likes": 0,
                "tags": [],
                "siblings": siblings,
            }
        )

    # ------------------------------------------------------------------ routes: upload

    def _route_preupload(self, call: _Call) -> _Reply:
        repo = self._writable_repo(call)
        commit = self._resolve(repo, call.params["rev"])[1]
        answers = []
        for item in json.loads(call.body)["files"]:
            path, size = item["path"], int(item["size"])
            remote = None
            if path in commit.files:
                data = commit.files[path]
                lfs = path in commit.lfs
                remote = hashlib.sha256(data).hexdigest() if lfs else git_blob_oid(data)
            answers.append(
                {
                    "path": path,
                    "uploadMode": "lfs" if self._is_lfs(path, size) else "regular",
                    "shouldIgnore": False,
                    "oid": remote,
                }
            )
        return _json({"files": answers, "commitOid": commit.oid})

    def _route_lfs_batch(self, call: _Call) -> _Reply:
        repo = self._writable_repo(call)
        payload = json.loads(call.body)
        if payload.get("operation") != "upload":
            raise HubError(400, "HubStandIn: only the upload operation of the LFS batch API")
        if "basic" not in payload.get("transfers", ["basic"]):
            raise HubError(400, "HubStandIn: only the basic LFS transfer")
        types = f"{repo.repo_type}s"
        objects = []
        for item in payload["objects"]:
            oid, size = item["oid"], int(item["size"])
            if not re.fullmatch(r"[0-9a-f]{64}", oid):
                objects.append(
                    {"oid": oid, "size": size, "error": {"code": 422, "message": "bad oid"}}
                )
            elif oid in repo.lfs_objects:
                objects.append({"oid": oid, "size": size})
            else:
                href = f"{self.endpoint}/__stand_in/lfs/{types}/{repo.repo_id}/{oid}"
                objects.append(
                    {
                        "oid": oid,
                        "size": size,
                        "authenticated": True,
                        "actions": {
                            "upload": {"href": f"{href}?size={size}", "expires_in": 3600},
                            "verify": {"href": f"{href}/verify", "header": {}},
                        },
                    }
                )
        return _json(
            {"transfer": "basic", "objects": objects, "hash_algo": "sha256"},
            content_type="application/vnd.git-lfs+json",
        )

    def _route_lfs_upload(self, call: _Call) -> _Reply:
        repo = self._call_repo(call)
        oid = call.params["oid"]
        if hashlib.sha256(call.body).hexdigest() != oid:
            raise HubError(400, "HubStandIn: uploaded bytes do not match the sha256")
        if "size" in call.query and int(call.query["size"]) != len(call.body):
            raise HubError(400, "HubStandIn: uploaded size does not match the batch request")
        repo.lfs_objects[oid] = call.body
        return _Reply(200)

    def _route_lfs_verify(self, call: _Call) -> _Reply:
        repo = self._writable_repo(call)
        payload = json.loads(call.body or b"{}")
        data = repo.lfs_objects.get(call.params["oid"])
        if data is None or int(payload.get("size", len(data))) != len(data):
            raise HubError(404, f"Object {call.params['oid']} not found")
        return _json({"success": True})

    def _route_commit(self, call: _Call) -> _Reply:
        repo = self._writable_repo(call)
        ref, base = self._resolve(repo, call.params["rev"])
        if ref is None:
            raise HubError(400, "HubStandIn: commit to a branch or refs/pr/N, not a commit oid")
        lines = [json.loads(line) for line in call.body.splitlines() if line.strip()]
        header = next((line["value"] for line in lines if line["key"] == "header"), None)
        if header is None:
            raise HubError(400, "Missing commit header")
        parent = header.get("parentCommit")
        if parent and not base.oid.startswith(parent):
            raise HubError(412, "A commit has happened since. Please refresh and try again.")
        files = dict(base.files)
        lfs = set(base.lfs)
        for line in lines:
            key, value = line["key"], line["value"]
            path = value.get("path", "")
            if key == "header":
                continue
            if key == "file":
                files[path] = _content(value)
                lfs.discard(path)
            elif key == "lfsFile":
                data = repo.lfs_objects.get(value["oid"])
                if data is None:
                    raise HubError(
                        400, f"HubStandIn: LFS object {value['oid']} of {path} was never uploaded"
                    )
                if "size" in value and int(value["size"]) != len(data):
                    raise HubError(400, f"HubStandIn: wrong size for LFS file {path}")
                files[path] = data
                lfs.add(path)
            elif key == "deletedFile":
                if path not in files:
                    raise HubError(404, "A file with this name doesn't exist", "EntryNotFound")
                del files[path]
                lfs.discard(path)
            elif key == "deletedFolder":
                prefix = path.rstrip("/") + "/"
                doomed = [p for p in files if p.startswith(prefix)]
                if not doomed:
                    raise HubError(404, "A folder with this name doesn't exist", "EntryNotFound")
                for doomed_path in doomed:
                    del files[doomed_path]
                    lfs.discard(doomed_path)
            else:
                raise HubError(400, f"HubStandIn: unknown commit operation {key}")
        pr_url = None
        if call.query.get("create_pr") in ("1", "true", "True"):
            num = max(repo.discussions, default=0) + 1
            title = header.get("summary", "")
            repo.discussions[num] = PullRequest(num, title, True, ref, "open", _now())
            repo.branches[f"refs/pr/{num}"] = list(repo.branches[ref])
            ref = f"refs/pr/{num}"
            pr_url = f"{self._repo_url(repo)}/discussions/{num}"
        commit = self._new_commit(
            base, header.get("summary", ""), header.get("description", ""), files, lfs
        )
        repo.branches[ref].append(commit)
        answer: dict[str, Any] = {
            "success": True,
            "commitOid": commit.oid,
            "commitUrl": f"{self._repo_url(repo)}/commit/{commit.oid}",
            "hookOutput": "",
        }
        if pr_url is not None:
            answer["pullRequestUrl"] = pr_url
        return _json(answer)

    def _route_xet_token(self, call: _Call) -> _Reply:
        raise HubError(
            501,
            "HubStandIn has no Xet storage: set huggingface_hub.constants.HF_HUB_DISABLE_XET",
        )

    # ------------------------------------------------------------------ routes: listing

    def _route_tree(self, call: _Call) -> _Reply:
        repo = self._readable_repo(call)
        commit = self._resolve(repo, call.params["rev"])[1]
        path = call.params.get("path", "").strip("/")
        recursive = call.query.get("recursive", "").lower() in ("1", "true")
        expand = call.query.get("expand", "").lower() in ("1", "true")
        paths = self._entries(repo, commit, path, recursive)
        return _json([self._entry(repo, commit, p, expand) for p in paths])

    def _route_paths_info(self, call: _Call) -> _Reply:
        repo = self._readable_repo(call)
        commit = self._resolve(repo, call.params["rev"])[1]
        if call.headers.get("content-type", "").startswith("application/json"):
            payload = json.loads(call.body)
            paths, expand = list(payload.get("paths", [])), bool(payload.get("expand"))
        else:
            form = parse_qs(call.body.decode())
            paths = form.get("paths", [])
            expand = form.get("expand", ["false"])[-1].lower() in ("1", "true")
        answer = []
        for raw in paths:
            path = raw.strip("/")
            is_folder = any(p.startswith(path + "/") for p in commit.files)
            if path in commit.files or (path and is_folder):
                answer.append(self._entry(repo, commit, path, expand))
        return _json(answer)

    def _route_commits(self, call: _Call) -> _Reply:
        repo = self._readable_repo(call)
        commit = self._resolve(repo, call.params["rev"])[1]
        return _json(
            [
                {
                    "id": c.oid,
                    "title": c.title,
                    "message": c.message,
                    "authors": [{"user": USER}],
                    "date": c.date,
                }
                for c in reversed(self._history(repo, commit))
            ]
        )

    def _route_refs(self, call: _Call) -> _Reply:
        repo = self._readable_repo(call)
        branches = [
            {"name": name, "ref": f"refs/heads/{name}", "targetCommit": history[-1].oid}
            for name, history in repo.branches.items()
            if not name.startswith("refs/")
        ]
        answer: dict[str, Any] = {"branches": branches, "converts": [], "tags": []}
        if call.query.get("include_prs") in ("1", "true", "True"):
            answer["pullRequests"] = [
                {"name": name, "ref": name, "targetCommit": history[-1].oid}
                for name, history in repo.branches.items()
                if name.startswith("refs/pr/")
            ]
        return _json(answer)

    def _route_create_branch(self, call: _Call) -> _Reply:
        repo = self._writable_repo(call)
        branch = call.params["branch"]
        if branch.startswith("refs/") or not branch:
            raise HubError(400, f"Invalid branch name {branch}")
        if branch in repo.branches:
            raise HubError(409, f"Branch {branch} already exists")
        start = json.loads(call.body or b"{}").get("startingPoint") or "main"
        commit = self._resolve(repo, start)[1]
        repo.branches[branch] = list(self._history(repo, commit))
        return _json({})

    def _route_delete_branch(self, call: _Call) -> _Reply:
        repo = self._writable_repo(call)
        branch = call.params["branch"]
        if branch == "main":
            raise HubError(403, "Cannot delete the default branch")
        if branch not in repo.branches:
            raise HubError(404, f"Invalid rev id: {branch}", "RevisionNotFound")
        del repo.branches[branch]
        return _json({})

    def _route_create_discussion(self, call: _Call) -> _Reply:
        repo = self._writable_repo(call)
        payload = json.loads(call.body or b"{}")
        num = max(repo.discussions, default=0) + 1
        is_pr = bool(payload.get("pullRequest"))
        status = "draft" if is_pr else "open"
        repo.discussions[num] = PullRequest(
            num, payload.get("title", ""), is_pr, "main", status, _now()
        )
        if is_pr:
            repo.branches[f"refs/pr/{num}"] = list(repo.branches["main"])
        return _json({"num": num, "url": f"{self._repo_url(repo)}/discussions/{num}"})

    def _route_discussion(self, call: _Call) -> _Reply:
        repo = self._readable_repo(call)
        discussion = repo.discussions.get(int(call.params["num"]))
        if discussion is None:
            raise HubError(404, f"Discussion {call.params['num']} not found")
        return _json(
            {
                "num": discussion.num,
                "title": discussion.title,
                "status": discussion.status,
                "isPullRequest": discussion.is_pull_request,
                "createdAt": discussion.created_at,
                "author": {"name": USER},
                "repo": {"name": repo.repo_id, "type": repo.repo_type},
                "events": [],
                "changes": {"base": f"refs/heads/{discussion.base}"},
                "filesWithConflicts": [],
            }
        )

    # ------------------------------------------------------------------ routes: download

    def _route_resolve(self, call: _Call) -> _Reply:
        repo = self._readable_repo(call)
        commit = self._resolve(repo, call.params["rev"])[1]
        path = call.params["path"]
        if path not in commit.files:
            raise HubError(
                404,
                f"Entry not found: {path}",
                "EntryNotFound",
                headers={"X-Repo-Commit": commit.oid},
            )
        data = commit.files[path]
        reply_headers = {
            "Content-Type": "application/octet-stream",
            "X-Repo-Commit": commit.oid,
            "Accept-Ranges": "bytes",
        }
        if path in commit.lfs:
            sha = hashlib.sha256(data).hexdigest()
            reply_headers.update(
                {"ETag": f'"{sha}"', "X-Linked-Etag": f'"{sha}"', "X-Linked-Size": str(len(data))}
            )
        else:
            reply_headers["ETag"] = f'"{git_blob_oid(data)}"'
        requested = re.fullmatch(r"bytes=(\d+)-(\d*)", call.headers.get("range", ""))
        if requested and int(requested[1]) < len(data):
            start = int(requested[1])
            end = min(int(requested[2]) if requested[2] else len(data) - 1, len(data) - 1)
            reply_headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            return _Reply(206, data[start : end + 1], reply_headers)
        return _Reply(200, data, reply_headers)


def point_client_at(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, endpoint: str, xet: bool
) -> None:
    """Point the client at the stand-in, caches under tmp_path. huggingface_hub reads these
    variables at import, so its constants are patched too: hf_hub_url builds on
    HUGGINGFACE_CO_URL_TEMPLATE and swaps in `endpoint=` only where that starts with
    ENDPOINT. Xet is the client's own choice (see the stand-in's docstring): off unless a
    test runs the Xet-only upload pipeline; hf_xet puts its logs under HF_HOME or
    HF_XET_CACHE as set when it is first imported."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_XET_CACHE", str(tmp_path / "hf-home" / "xet"))
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    template = endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", not xet)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_PROGRESS_BARS", True)
    monkeypatch.setattr(constants, "AGENT_HARNESSES_PATH", str(tmp_path / "agent-harnesses.json"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-home" / "hub"))
    monkeypatch.setattr(constants, "HF_XET_CACHE", str(tmp_path / "hf-home" / "xet"))
