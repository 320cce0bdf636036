"""A field mapping: where a record with renamed keys keeps its conversation, in the
project's own words, read from any of the three ways curators already write it: ours,
a LLaMA-Factory `dataset_info.json` entry (`formatting`, `columns`, `tags`) or axolotl's
(`field_messages`, `message_property_mappings`, `roles`, `message_field_training`).
The data is checked against the pipeline config schema's `mapping` first."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from pipeline.sources.paths import HF_PREFIX

ROLE_TARGETS = ("user", "assistant", "system", "tool_call", "tool")
"""What a source role can mean: a user turn, an assistant answer, a system prompt, an
assistant's tool call (JSON `{name, arguments}`, or a list of them), a tool's result."""
DEFAULT_ROLES: dict[str, str] = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "system": "system",
    "function_call": "tool_call",
    "observation": "tool",
    "tool": "tool",
    "function": "tool",
}
"""Role names understood without a mapping (ShareGPT's, OpenAI's, Gemini's)."""
LLAMA_FACTORY_TAGS = {
    "user_tag": "user",
    "assistant_tag": "assistant",
    "observation_tag": "tool",
    "function_tag": "tool_call",
    "system_tag": "system",
}
"""LLaMA-Factory's `tags` naming a role, and what each role is."""
LLAMA_FACTORY_COLUMNS = {
    "messages": "messages",
    "system": "system",
    "tools": "tools",
    "chosen": "chosen",
    "rejected": "rejected",
    "kto_tag": "label",
    "images": "images",
    "videos": "videos",
    "audios": "audios",
    "prompt": "prompt",
    "query": "query",
    "response": "response",
    "history": "history",
}
"""LLaMA-Factory's `columns` and the FieldMapping field each one sets."""


class MappingError(ValueError):
    """A mapping that cannot be used (a key path and why)."""


@dataclass(frozen=True, slots=True)
class FieldMapping:
    """Which keys of a record hold what. `shape` `messages`: a list of messages under
    `messages` (None: `conversations` or `messages`), each with its role under `role` and
    text under `content` (None: `from`/`value` or `role`/`content`), role names read
    through `roles`; `alpaca`: `prompt`, `query`, `response` and `history` columns, no
    `response` making prompt-only threads. Keys may be dotted paths (`data.turns`)."""

    shape: Literal["messages", "alpaca"] = "messages"
    messages: str | None = None
    role: str | None = None
    content: str | None = None
    roles: tuple[tuple[str, str], ...] = ()
    weight: str | None = None
    system: str | None = None
    tools: str | None = None
    chosen: str | None = None
    rejected: str | None = None
    label: str | None = None
    images: str | None = None
    videos: str | None = None
    audios: str | None = None
    prompt: str | None = None
    query: str | None = None
    response: str | None = None
    history: str | None = None
    id: str | None = None

    def to_plain(self) -> dict[str, Any]:
        """The keys set (for a manifest's resolved config), roles as `{name: meaning}`."""
        plain: dict[str, Any] = {"shape": self.shape}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name not in ("shape", "roles") and value is not None:
                plain[name] = value
        if self.roles:
            plain["roles"] = dict(self.roles)
        return plain

    def role_of(self, name: str) -> str | None:
        """What the source role `name` is (ROLE_TARGETS), None when neither the mapping
        nor the usual names know it."""
        for source, target in self.roles:
            if source == name:
                return target
        return DEFAULT_ROLES.get(name.lower())

    def role_names(self) -> list[str]:
        """Every role name understood, for error messages."""
        return list(dict.fromkeys([source for source, _ in self.roles] + list(DEFAULT_ROLES)))


@dataclass(frozen=True, slots=True)
class FileMappings:
    """A mapping per input file or folder (a LLaMA-Factory registry names one per
    dataset): `for_source` finds a record's by its file, or the nearest folder above; an
    `hf:` dataset's by the dataset, whatever split its records come from."""

    by_path: tuple[tuple[str, FieldMapping], ...] = field(default=())

    def for_source(self, source: str) -> FieldMapping | None:
        return _mapping_of(self, source)


@lru_cache(maxsize=1024)
def _mapping_of(mappings: FileMappings, source: str) -> FieldMapping | None:
    """FileMappings.for_source, found once per source (its records all ask)."""
    found = {source_key(path): mapping for path, mapping in mappings.by_path}
    path = source_key(source)
    if path.startswith(HF_PREFIX):
        return found.get(path)
    while True:
        if path in found:
            return found[path]
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def source_key(source: str) -> str:
    """Where a record came from, as mappings are keyed: a local path made absolute, an
    `hf:` dataset without the `[config/split]` its records name."""
    if source.startswith(HF_PREFIX):
        return source[: source.rindex("[")] if source.endswith("]") and "[" in source else source
    return os.path.abspath(source)


def mapping_from_data(data: dict[str, Any]) -> FieldMapping:
    """The FieldMapping that schema-checked mapping data describes (our keys, a
    LLaMA-Factory entry, or axolotl's keys, which may be mixed). Raises MappingError for
    what a schema cannot say (a role named twice with two meanings)."""
    values: dict[str, Any] = {}
    roles: dict[str, str] = {}
    if "formatting" in data or "columns" in data or "tags" in data:
        values, roles = _llama_factory(data)
    if "field_messages" in data:
        values["messages"] = data["field_messages"]
    properties = data.get("message_property_mappings") or {}
    for ours, theirs in (("role", "message_field_role"), ("content", "message_field_content")):
        if theirs in data:
            values[ours] = data[theirs]
        if ours in properties:
            values[ours] = properties[ours]
    for ours, theirs in (
        ("weight", "message_field_training"),
        ("system", "field_system"),
        ("tools", "field_tools"),
    ):
        if theirs in data:
            values[ours] = data[theirs]
    for key in FieldMapping.__dataclass_fields__:
        if key in data and key != "roles":
            values[key] = data[key]
    for source_or_target, value in (data.get("roles") or {}).items():
        pairs = (
            [(name, source_or_target) for name in value]
            if isinstance(value, list)
            else [(source_or_target, value)]
        )
        for source, target in pairs:
            if roles.get(source, target) != target:
                raise MappingError(
                    f"roles: {source!r} is mapped to both {roles[source]!r} and {target!r}"
                )
            roles[source] = target
    return FieldMapping(**values, roles=tuple(sorted(roles.items())))


def _llama_factory(entry: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A LLaMA-Factory dataset_info entry's columns and role tags, in our names."""
    formatting = entry.get("formatting", "alpaca")
    values: dict[str, Any] = {"shape": "alpaca" if formatting == "alpaca" else "messages"}
    columns = entry.get("columns") or {}
    for column, ours in LLAMA_FACTORY_COLUMNS.items():
        if columns.get(column):
            values[ours] = columns[column]
    if formatting == "alpaca":
        values.setdefault("prompt", "instruction")
        values.setdefault("query", "input")
        if not entry.get("ranking"):
            values.setdefault("response", "output")
    if entry.get("ranking"):
        values.setdefault("chosen", "chosen")
        values.setdefault("rejected", "rejected")
    tags = entry.get("tags") or {}
    if "role_tag" in tags:
        values["role"] = tags["role_tag"]
    if "content_tag" in tags:
        values["content"] = tags["content_tag"]
    roles = {tags[tag]: target for tag, target in LLAMA_FACTORY_TAGS.items() if tags.get(tag)}
    return values, roles
