"""The plugin benchmarks/curation.py runs: a count of links, as a curator's filter might be."""

from __future__ import annotations

from typing import Any


def url_count(thread: Any) -> dict[str, int] | None:
    """Tags a thread with how many links its messages hold."""
    urls = sum(message.content.count("http") for message in thread.messages)
    return {"urls": urls} if urls else None
