"""The names threads record for their input files: each file's path relative to the
input the user named, so that a thread's id and lineage do not depend on where the input
lives (another folder, another machine, a bucket).

A file input is named by its base name, a folder's files by their path under the folder,
a glob's files by their path under the glob's fixed leading folder; a Hub dataset (`hf:`)
and standard input (`-`) keep the name they are given. Two files of one run whose names
collide (`a/chat.jsonl` and `b/chat.jsonl`, both `chat.jsonl`) must not share ids: the
first in run order keeps the name, each later one is qualified by the 1-based position of
its input in the run (`#2/chat.jsonl`), with one more `#` in front for as long as the
qualified name is taken too. So names depend only on the inputs' contents and order.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import PurePath

QUALIFIER = "#"
"""What a qualified name starts with, before its input's position."""


def relative_name(path: str, root: str) -> str:
    """The name of the file at `path` found under the folder `root` (`/`-separated).

    >>> relative_name("/data/chats/a/chat.jsonl", "/data/chats")
    'a/chat.jsonl'
    >>> relative_name("chat.jsonl", ".")
    'chat.jsonl'
    """
    return PurePath(os.path.relpath(path, root or ".")).as_posix()


def unique_names(named: Iterable[tuple[int, str]]) -> list[str]:
    """The names of a run's files, given as (input position from 0, name) in run order,
    with each name that an earlier file already has qualified by its input's position.

    >>> unique_names([(0, "chat.jsonl"), (1, "chat.jsonl"), (1, "other.jsonl")])
    ['chat.jsonl', '#2/chat.jsonl', 'other.jsonl']
    """
    entries = list(named)
    taken = {name for _, name in entries}
    seen: set[str] = set()
    names: list[str] = []
    for position, name in entries:
        if name in seen:
            qualified = f"{QUALIFIER}{position + 1}/{name}"
            while qualified in taken:
                qualified = QUALIFIER + qualified
            taken.add(qualified)
            name = qualified
        seen.add(name)
        names.append(name)
    return names
