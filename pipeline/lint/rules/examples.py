"""Small builders for the rules' bad/good example threads, so the docs read like data."""

from __future__ import annotations

from typing import Any


def thread(*messages: dict[str, Any], id: str = "t1", **fields: Any) -> dict[str, Any]:
    return {"id": id, "messages": list(messages), **fields}


def developer(content: str) -> dict[str, Any]:
    return {"role": "developer", "content": content}


def user(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: str, format: str = "markdown", end_turn: bool = True) -> dict[str, Any]:
    return {"role": "assistant", "format": format, "content": content, "end_turn": end_turn}


def context(content: str, name: str | None = None) -> dict[str, Any]:
    return {"role": "context", "name": name, "content": content}


def tool_format(name: str, sampler: str = "json") -> dict[str, Any]:
    """A settings entry for a tool call format, as converters write it."""
    return {"name": f"{name}:{sampler}", "halt_on_completion": True, "sampler": sampler}
