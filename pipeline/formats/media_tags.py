"""LLaMA-Factory media tags: `<image>`, `<video>`, `<audio>` in message text that point
into the record's top-level `images` / `videos` / `audios` lists (and, kept, LLaVA's and
xtuner's single `image`), and Qwen-VL's inline `<img>PATH</img>`. The openai, sharegpt
and swift adapters all read such files, so all use this one reading."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from pipeline.formats.builder import ThreadBuilder, a_json_kind
from pipeline.formats.media import from_reference
from pipeline.mms import Media
from pipeline.quarantine import RecordRejected

MEDIA_LISTS = {"images": "image", "videos": "video", "audios": "audio"}
"""Top-level list key -> the tag kind its items are referenced by."""
LLAVA_IMAGE = "image"
"""LLaVA's and xtuner's top-level key: one image (a path) for the record's `<image>` tag;
read when media are kept (before that it was kept in meta as any other field)."""


class MediaTags:
    """The tags of the media a record lists: kept as media (`--multimodal keep`: each tag
    takes the next item of its list, in order), or dropped or replaced by placeholders;
    a list whose length does not match its tags is quarantined when media are kept,
    noted otherwise. With `inline`, Qwen-VL `<img>PATH</img>` tags are kept too."""

    def __init__(self, builder: ThreadBuilder, record: dict[str, Any], *, inline: bool = False):
        self.builder = builder
        self.record = record
        self.lists = {
            kind: key for key, kind in MEDIA_LISTS.items() if record.get(key) not in (None, [])
        }
        keeps = builder.keeps_media
        if keeps and "image" not in self.lists and record.get(LLAVA_IMAGE) not in (None, [], ""):
            self.lists["image"] = LLAVA_IMAGE
        self.counts: Counter[str] = Counter()
        kinds = "|".join(sorted(self.lists))
        self._pattern = re.compile(rf"<({kinds})>(\n?)") if kinds else None
        alternatives = [r"<img>(?P<inline>.*?)</img>"] if inline else []
        if kinds:
            alternatives.append(rf"<(?P<tag>{kinds})>")
        self._kept = re.compile("|".join(alternatives), re.DOTALL) if alternatives else None

    @property
    def read_keys(self) -> frozenset[str]:
        """The record's keys read into the messages (their media kept): not to be kept
        again in `meta.extra_fields`."""
        return frozenset(self.lists.values()) if self.builder.keeps_media else frozenset()

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

    def take(self, text: str) -> list[str | Media]:
        """One text as pieces: with media kept, its text around each tag and the media the
        tag names, in order (the text as written otherwise); else `[replace(text)]`."""
        if not self.builder.keeps_media:
            return [self.replace(text)]
        if self._kept is None or not self._kept.search(text):
            return [text]
        pieces: list[str | Media] = []
        last = 0
        for match in self._kept.finditer(text):
            media = self._named(match)
            if media is None:
                continue
            pieces += [text[last : match.start()], media]
            last = match.end()
        pieces.append(text[last:])
        return [piece for piece in pieces if piece != ""]

    def next_listed(self, kind: str) -> Media | None:
        """The next item of the list of `kind`, for a content part that names no source
        of its own (Hugging Face's and TRL's `{"type": "image"}` with an `images` column):
        it takes its place as a tag would; None past the end (`finish` rejects the record)
        or when the record lists no media of that kind."""
        key = self.lists.get(kind)
        if key is None:
            return None
        index = self.counts[kind]
        self.counts[kind] += 1
        items = self.record[key]
        items = items if isinstance(items, list) else [items]
        return self._media(kind, key, index, items[index]) if index < len(items) else None

    def tagged(self, text: str) -> bool:
        """Whether the text holds a tag of a listed media (or an inline one)."""
        return self._kept is not None and self._kept.search(text) is not None

    def listed(self) -> list[Media]:
        """Every listed media in list order (images, videos, audios), for a record whose
        text names none by a tag: each counts as taken."""
        found: list[Media] = []
        for kind, key in self.lists.items():
            items = self.record[key]
            for index, item in enumerate(items if isinstance(items, list) else [items]):
                self.counts[kind] += 1
                found.append(self._media(kind, key, index, item))
        return found

    def _media(self, kind: str, key: str, index: int, item: Any) -> Media:
        media = from_reference(kind, item)
        if media is None:
            raise RecordRejected(
                "missing_field", f"{key}[{index}] is {a_json_kind(item)}, not a path, URL or data"
            )
        return media

    def _named(self, match: re.Match[str]) -> Media | None:
        """The media a tag stands for; None (the tag stays text) for a tag past the end of
        its list (`finish` rejects the record) or an inline tag naming nothing."""
        groups = match.groupdict()
        if groups.get("inline") is not None:
            return from_reference("image", groups["inline"].strip())
        return self.next_listed(groups["tag"])

    def finish(self) -> None:
        """Check every media list against the number of its tags: a mismatch quarantines
        the record when media are kept (`media_mismatch`: some would be lost or have no
        place), and is noted otherwise."""
        for kind, key in self.lists.items():
            items = self.record[key]
            listed = len(items) if isinstance(items, list) else 1
            if listed != self.counts[kind]:
                message = (
                    f"{key} lists {listed} file(s) but the turns hold {self.counts[kind]} <{kind}>"
                )
                if self.builder.keeps_media:
                    raise RecordRejected("media_mismatch", message)
                self.builder.note(message)
