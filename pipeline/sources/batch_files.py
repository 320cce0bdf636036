"""OpenAI Batch API files read together: an output file (`{custom_id, response}` lines)
and, beside it in the same folder, the request file it answers (`{custom_id, url, body}`
lines holding the output's first `custom_id`). The request file is read as part of the
output file (as a `config.json` is with its `skprompt.txt`): each answer is joined with its
request, and a request no output line answers is read on its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import orjson

from pipeline import storage
from pipeline.sources.compression import open_binary, split_compression

FIRST_LINE_BYTES = 1 << 20
"""How much of a file's start is read to tell a batch file by its first line."""
RATIO = 1000
"""The decompression ratio past which a compressed batch file stops being read."""


def _jsonl(path: str) -> bool:
    return split_compression(path)[0].lower().endswith(".jsonl")


def batch_line_kind(value: Any) -> str | None:
    """`request` or `output` for a line of a Batch API file, None for anything else."""
    if not isinstance(value, dict) or not isinstance(value.get("custom_id"), (str, int)):
        return None
    if isinstance(value.get("body"), dict) and isinstance(value.get("url"), str):
        return "request"
    if "response" in value and (isinstance(value["response"], dict) or value.get("error")):
        return "output"
    return None


def request_file_for(output: str) -> str | None:
    """The request file beside the output file `output` (same folder, JSON Lines, batch
    request lines, one of them the output's first custom_id), None when there is none or
    `output` is no batch output file."""
    first = _first_line(output)
    if batch_line_kind(first) != "output":
        return None
    assert isinstance(first, dict)
    wanted = first["custom_id"]
    for path in _neighbours(output):
        if path == output:
            continue
        if not _jsonl(path):
            continue
        request = _first_line(path)
        if batch_line_kind(request) != "request" or not _answers(first, request):
            continue
        if wanted in _custom_ids(path):
            return path
    return None


ENDPOINTS = {
    "chat.completion": "/chat/completions",
    "text_completion": "/completions",
    "response": "/responses",
    "list": "/embeddings",
    "embedding": "/embeddings",
}
"""The endpoint an output body's `object` answers."""


def _answers(output: dict[str, Any], request: dict[str, Any]) -> bool:
    """Whether the output line may answer the request line's endpoint (when its body
    says what it is: `object`); a body that does not say may answer any."""
    response = output.get("response")
    body = response.get("body", response) if isinstance(response, dict) else None
    kind = body.get("object") if isinstance(body, dict) else None
    endpoint = ENDPOINTS.get(kind) if isinstance(kind, str) else None
    url = str(request.get("url", "")).split("?", 1)[0].rstrip("/")
    if endpoint is None:
        return True
    return url.endswith(endpoint) and not (
        endpoint == "/completions" and url.endswith("/chat/completions")
    )


def batch_companions(files: list[str]) -> dict[str, str]:
    """The request files to read as part of an output file among `files` (request path:
    output path); a request file goes with the first output file that names it."""
    found: dict[str, str] = {}
    for path in files:
        if _jsonl(path):
            request = request_file_for(path)
            if request is not None and request not in found:
                found[request] = path
    return found


def iter_lines(path: str) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of a (possibly compressed) JSON Lines file, numbered from 1."""
    with open_binary(path, RATIO) as stream:
        for number, line in enumerate(stream, 1):
            if line.strip():
                yield number, line


def _neighbours(path: str) -> list[str]:
    """The regular files (not links) in the folder of `path`, sorted: a stored file's
    neighbours are the objects directly under its prefix."""
    if storage.is_url(path):
        return storage.listdir(storage.parent(path))
    folder = os.path.dirname(path) or "."
    found = []
    for name in sorted(os.listdir(folder)):
        neighbour = os.path.join(folder, name) if os.path.dirname(path) else name
        if not os.path.islink(neighbour) and os.path.isfile(neighbour):
            found.append(neighbour)
    return found


@lru_cache(maxsize=256)
def _first_line(path: str) -> Any:
    try:
        with open_binary(path, RATIO) as stream:
            line = stream.readline(FIRST_LINE_BYTES)
        return orjson.loads(line) if line.strip() else None
    except (OSError, orjson.JSONDecodeError, ValueError):
        return None


@lru_cache(maxsize=16)
def _custom_ids(path: str) -> frozenset[Any]:
    """Every custom_id of a request file (a batch holds at most tens of thousands)."""
    ids = set()
    try:
        for _, line in iter_lines(path):
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(value, dict):
                ids.add(value.get("custom_id"))
    except OSError:
        return frozenset()
    return frozenset(ids)
