"""An objective row seen as the SFT rows it was cut from, for checks that render threads
again (`mms verify`): a pair gives its two sides, a labelled completion one thread, a
prompt row its prompt (with the generation prompt its ids end with). Any row checks
like an SFT row this way: what it stores must be what its messages render."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pipeline.mms import MEDIA_COLUMN, MEDIA_MARKER, normalize_thread_dict
from pipeline.mms.arrow import marked_content
from pipeline.tokenize.renderer import IGNORE


@dataclass(frozen=True, slots=True)
class SftView:
    """One thread of a row: its name (`ROW` or `ROW:chosen` ...), messages, the ids and
    labels stored for it (labels None for a prompt, which trains nothing), where the row
    cut it (the tokens of its prompt; None for an SFT row), and whether its ids end with
    the generation prompt (a prompt row)."""

    name: str
    messages: list[dict[str, Any]]
    input_ids: list[int]
    labels: list[int] | None
    prompt_tokens: int | None = None
    generation_prompt: bool = False


def sft_views(
    row: dict[str, Any], placeholders: dict[int, str] | None = None, *, stored: bool = False
) -> list[SftView]:
    """The SFT views of a shard row of any objective (an SFT row is its own); with
    `placeholders` (id to media kind, of an output whose tokenizer ships them), the
    messages of an objective's row get their media back from their markers and the
    view's ids (`placed_media`: such a row holds no thread `media` column). `stored`:
    the messages exactly as the row stores them (what a trainer reads), media unplaced."""
    name = str(row["id"])
    if "messages" in row:
        messages = list(row["messages"]) if stored else _messages(row)
        return [SftView(name, messages, row["input_ids"], row["labels"])]
    prompt, prompt_ids = row["prompt"], row["prompt_ids"]
    untrained = [IGNORE] * len(prompt_ids)
    if "chosen_ids" in row:
        views = [
            SftView(
                f"{name}:{side}",
                prompt + row[side],
                prompt_ids + row[f"{side}_ids"],
                untrained + row[f"{side}_labels"],
                len(prompt_ids),
            )
            for side in ("chosen", "rejected")
        ]
    elif "completion_ids" in row:
        views = [
            SftView(
                name,
                prompt + row["completion"],
                prompt_ids + row["completion_ids"],
                untrained + row["completion_labels"],
                len(prompt_ids),
            )
        ]
    else:
        views = [SftView(name, prompt, prompt_ids, None, len(prompt_ids), generation_prompt=True)]
    if stored:
        return views
    views = [dataclasses.replace(view, messages=_marked(view.messages)) for view in views]
    return [_with_media(view, placeholders) for view in views] if placeholders else views


def placed_media(
    messages: list[dict[str, Any]], ids: list[int], placeholders: dict[int, str]
) -> list[dict[str, Any]] | None:
    """The `media` column entries of messages whose media are not in the row: from their
    markers and the ids' placeholders, in order, kinds only (rendering needs no source);
    None when they hold no marker or the counts differ (rendering again then fails)."""
    kinds = [placeholders[i] for i in ids if i in placeholders]
    markers = [
        index
        for index, message in enumerate(messages)
        for _ in range(_marked_text(message.get("content")).count(MEDIA_MARKER))
    ]
    if not kinds or len(kinds) != len(markers):
        return None
    return [
        {"message": index, "kind": kind, "path": "?", "url": None, "data": None, "mime": None}
        for index, kind in zip(markers, kinds, strict=True)
    ]


def _marked_text(content: Any) -> str:
    """A stored content's text with its media at their markers (`marked_content`)."""
    marked = marked_content(content)
    return marked if isinstance(marked, str) else ""


def _marked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages, a content stored as a list of parts read back to its markers."""
    return [
        {**message, "content": marked_content(message["content"])}
        if isinstance(message.get("content"), list)
        else message
        for message in messages
    ]


def _with_media(view: SftView, placeholders: dict[int, str]) -> SftView:
    """`view` with its messages' media placed back as parts (`placed_media`)."""
    media = placed_media(view.messages, view.input_ids, placeholders)
    if media is None:
        return view
    messages = _messages({"messages": view.messages, MEDIA_COLUMN: media})
    return dataclasses.replace(view, messages=messages)


def _messages(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A row's messages; with media (its `media` column, DESIGN §7), each message that holds
    some as its list of parts, media at their markers: the form the chat template renders
    the placeholders of and the renderer reads back to the thread."""
    if not row.get(MEDIA_COLUMN):
        return _marked(row["messages"])
    data = {"messages": row["messages"], MEDIA_COLUMN: row[MEDIA_COLUMN]}
    messages: list[dict[str, Any]] = normalize_thread_dict(data)["messages"]
    return messages
