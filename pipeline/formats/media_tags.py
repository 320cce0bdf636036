"""LLaMA-Factory media tags: `<image>`, `<video>`, `<audio>` in message text that point
into the record's top-level `images` / `videos` / `audios` lists. Both the openai and the
sharegpt adapters read LLaMA-Factory files, so both use this one reading."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from pipeline.formats.builder import ThreadBuilder

MEDIA_LISTS = {"images": "image", "videos": "video", "audios": "audio"}
"""Top-level list key -> the tag kind its items are referenced by."""


class MediaTags:
    """Drops (or replaces with placeholders) the tags of the media a record lists, counts
    them, and notes lists whose length does not match the tags found."""

    def __init__(self, builder: ThreadBuilder, record: dict[str, Any]):
        self.builder = builder
        self.record = record
        self.lists = {
            kind: key for key, kind in MEDIA_LISTS.items() if record.get(key) not in (None, [])
        }
        self.counts: Counter[str] = Counter()
        kinds = "|".join(sorted(self.lists))
        self._pattern = re.compile(rf"<({kinds})>(\n?)") if kinds else None

    def replace(self, text: str) -> str:
        """The text with listed media tags dropped (then stripped) or placeholdered;
        tags of media the record does not list stay literal text."""
        if self._pattern is None or not self._pattern.search(text):
            return text

        def one(match: re.Match[str]) -> str:
            self.counts[match.group(1)] += 1
            placeholder = self.builder.media(match.group(1))
            return "" if placeholder is None else placeholder + match.group(2)

        replaced = self._pattern.sub(one, text)
        return replaced if self.builder.options.multimodal == "placeholder" else replaced.strip()

    def note_mismatches(self) -> None:
        """Note every media list whose length differs from the number of its tags."""
        for kind, key in self.lists.items():
            items = self.record[key]
            listed = len(items) if isinstance(items, list) else 1
            if listed != self.counts[kind]:
                self.builder.note(
                    f"{key} lists {listed} file(s) but the turns hold {self.counts[kind]} <{kind}>"
                )
