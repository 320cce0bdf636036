"""The keys that say when two threads are the same conversation, and which threads must
land in the same split. Exact dedup, the MMS501 lint rule, sampling and the split all use
them, so "duplicate" means one thing everywhere.

Converters word and order the developer message that declares tools differently from
thread to thread (chosen from the thread id); they record where that message is and a key
of what it declares (`meta.declaration`), so two copies of one source conversation get
one content key whatever their ids."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import orjson

from pipeline.mms import Media, Message, Thread
from pipeline.mms.groups import group_of
from pipeline.mms.media_checked import media_meta_sha

DECLARATION_META = "declaration"
"""`meta.declaration = {"message": index, "key": hex}`: the converter-written developer
message at `index` declares what `key` digests (tools by name, description and schema,
reasoning, the response format), in words chosen per thread."""


def _digest(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def declaration_key(declared: str) -> str:
    """The key a converter records for what its declaration message declares (given as
    canonical JSON text), independent of how the message words it."""
    return f"{_digest(declared.encode()):016x}"


def _declared_message(thread: Thread) -> tuple[int, str] | None:
    """(index, key) of the thread's converter-written declaration message, if it has one."""
    declared = thread.meta.get(DECLARATION_META) if isinstance(thread.meta, dict) else None
    if not isinstance(declared, dict):
        return None
    index, key = declared.get("message"), declared.get("key")
    if isinstance(index, int) and isinstance(key, str) and 0 <= index < len(thread.messages):
        return index, key
    return None


def comparable_messages(thread: Thread) -> list[Any]:
    """The messages as dedup compares them: each as it is, except the converter-written
    declaration message, which counts by what it declares, not by its wording, and a media
    whose bytes were checked, which counts by its kind and their sha256 (`meta.media_checked`,
    pipeline/media), not by where it is: the same image under two names is the same, two
    images under one text are not."""
    declared = _declared_message(thread)
    body: list[Any] = [m.to_dict() for m in _by_media_bytes(thread)]
    if declared is not None:
        index, key = declared
        body[index] = {"role": thread.messages[index].role, "declares": key}
    return body


def _by_media_bytes(thread: Thread) -> list[Message]:
    """The thread's messages with each media whose sha256 is known named by it."""
    digests = media_meta_sha(thread.meta)
    if digests is None:
        return list(thread.messages)
    known = iter(digests)
    messages = []
    for message in thread.messages:
        if message.media:
            named = []
            for media in message.media:
                digest = next(known, None)
                named.append(media if digest is None else Media(media.kind, url=f"sha256:{digest}"))
            message = dataclasses.replace(message, media=tuple(named))
        messages.append(message)
    return messages


def content_key(thread: Thread) -> int:
    """A 64-bit hash of the thread's content as the source meant it: its messages (the
    declaration by what it declares) and settings; id and meta aside."""
    settings = thread.settings.to_dict() if thread.settings else None
    body = [comparable_messages(thread), settings]
    try:
        return _digest(orjson.dumps(body))
    except TypeError:  # an integer beyond 64 bits in a sampler object
        return _digest(json.dumps(body, ensure_ascii=False).encode())


def group_content_key(keys: list[int]) -> int:
    """The content key of a group of threads (a preference pair, a task's instances): its
    members' keys in order, so a group is a duplicate of another group only when each of
    its threads is, in the same places."""
    return _digest(b"".join(key.to_bytes(8, "big") for key in keys))


def split_group(thread: Thread, key: int | None = None) -> str:
    """What decides a thread's sample and split: the threads of a group (both sides of a
    preference pair, a task's instances: pipeline/mms/groups.py) share their group; any
    other thread goes by its content key, so duplicates always land together. `key` is the
    content key when the caller has it."""
    group = group_of(thread.meta)
    if group is not None:
        return group
    return f"content:{content_key(thread) if key is None else key:016x}"
