"""The shipped chat template against the stored rows (when transformers is installed):
apply_chat_template of the output's tokenizer on every row's messages as stored, against
its input_ids and labels (`check_template`, `TemplateCheck`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.jobs.verify.base import Problem, Verification
from pipeline.jobs.verify.rows import read_rows, shipped_placeholders
from pipeline.objectives.views import SftView, sft_views
from pipeline.tokenize import IGNORE


def check_template(out: Path, shards: list[tuple[str, Path]], result: Verification) -> None:
    """apply_chat_template of the shipped tokenizer on every row's stored messages, against
    its input_ids and labels (a row with media: its messages as stored, media as content
    parts, so every such row renders its placeholders exactly where its ids hold them);
    rows whose text spells an added token are counted apart (`TemplateCheck`)."""
    check = TemplateCheck.load(out / "tokenizer", result)
    if check is None:
        return
    placeholders = shipped_placeholders(out)
    for split, rows in read_rows(shards, placeholders):
        for view in (view for row in rows for view in _template_views(row, placeholders)):
            check(split, view)


@dataclass
class TemplateCheck:
    """The shipped chat template of a tokenizer folder applied to views, each one's
    problem and counts added to `result`."""

    tokenizer: Any
    added: re.Pattern[str]
    result: Verification

    @classmethod
    def load(cls, folder: Path, result: Verification) -> TemplateCheck | None:
        """The check of the tokenizer in `folder`; None (a note or a problem in `result`)
        when transformers is not installed or the tokenizer has no chat template."""
        try:
            from transformers import AutoTokenizer
        except ImportError:
            result.notes.append("chat template not checked: transformers is not installed")
            return None
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        if not tokenizer.chat_template:
            result.problems.append(
                Problem("tokenizer/", "tokenizer_config.json has no chat template")
            )
            return None
        added = re.compile("|".join(map(re.escape, tokenizer.get_added_vocab())))
        return cls(tokenizer, added, result)

    def __call__(self, split: str, view: SftView) -> None:
        """The template on `view`'s messages against its ids and labels; a view whose text
        spells an added token cannot match (the template's string is tokenized with
        special-token matching on) and is counted apart."""
        texts = [_text(m.get("content")) for m in view.messages] + [
            m.get("name") or "" for m in view.messages
        ]
        if any(self.added.search(text) for text in texts):
            self.result.count("rows spelling a special token (template not comparable)")
            return
        what = _template_problem(self.tokenizer, view)
        if what:
            self.result.problems.append(
                Problem(f"{split} row {view.name}", f"the chat template gives other {what}")
            )
        self.result.count("rows against the chat template")
        if any(
            part.get("type") != "text"
            for m in view.messages
            if isinstance(m.get("content"), list)
            for part in m["content"]
        ):
            self.result.count("rows with media against the chat template")


def _template_views(row: dict[str, Any], placeholders: dict[int, str] | None) -> list[SftView]:
    """The views the chat template is applied to: a row whose messages hold their media as
    content parts (DESIGN §7) as it stores them, which is what a trainer reads; an older
    row (markers, and its media in the `media` column) with its media placed back."""
    stored = any(
        isinstance(message.get("content"), list)
        for name in ("messages", "prompt", "chosen", "rejected", "completion")
        for message in row.get(name) or ()
    )
    return sft_views(row, None if stored else placeholders, stored=stored)


def _text(content: Any) -> str:
    """A stored message's text: its content, or the text parts of its list of parts."""
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content if part.get("type") == "text")
    return content or ""


def _template_problem(tokenizer: Any, view: SftView) -> str | None:
    """Which of the view's ids or labels the shipped chat template renders otherwise."""
    if view.labels is None:  # a prompt: up to the generation prompt
        ids = tokenizer.apply_chat_template(
            view.messages, tokenize=True, return_dict=True, add_generation_prompt=True
        )["input_ids"]
        return "input_ids" if ids != view.input_ids else None
    rendered = tokenizer.apply_chat_template(
        view.messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = rendered["input_ids"], rendered["assistant_masks"]
    labels = [i if m else IGNORE for i, m in zip(ids, mask, strict=True)]
    if ids != view.input_ids:
        return "input_ids"
    return "labels" if labels != view.labels else None
