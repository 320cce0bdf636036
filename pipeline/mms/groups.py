"""Threads that stand or fall together: the two sides of a preference pair (`meta.pair_id`)
and the threads one record made as one unit (`meta.group_id`: the instances of one task,
the completions of one prompt). Every stage that leaves threads out keeps a group whole:
kept together or dropped together, never one side alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PAIR = "pair"
GROUP = "group"
GROUP_KEYS = (("pair_id", PAIR), ("group_id", GROUP))
"""The meta keys that name a group, and the kind of group each makes."""
GROUP_DROP = "group:"
"""The prefix of the reason a thread is left out for when another thread of its group was
(`group:REASON`)."""


def group_of(meta: Mapping[str, Any] | None) -> str | None:
    """The group a thread's meta puts it in (`pair:ID` or `group:ID`), None when alone.

    >>> group_of({"pair_id": "hh-7", "preference": "chosen"})
    'pair:hh-7'
    >>> group_of({"group_id": 3}) is None, group_of({}) is None
    (False, True)
    """
    if type(meta) is not dict and not isinstance(meta, Mapping):  # dict: the common case, fast
        return None
    for key, kind in GROUP_KEYS:
        value = meta.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "":
            return f"{kind}:{value}"
    return None


def group_column(threads: Sequence[Any]) -> list[str | None]:
    """Each thread's group instance: its group (`group_of` its meta) and where the run of
    consecutive threads of that group starts (the first one's locator, else its id), so
    two runs of one group never merge, even when a stage leaves out what was between
    them (a record read twice). A run also ends where one of its thread ids comes again.

    >>> from types import SimpleNamespace as T
    >>> a, b = (T(id=i, meta={"pair_id": 1, "locator": f"f:{i}"}) for i in "ab")
    >>> group_column([a, b, a, b, T(id="c", meta={})])
    ['pair:1@f:a', 'pair:1@f:a', 'pair:1@f:a#2', 'pair:1@f:a#2', None]
    """
    column: list[str | None] = []
    previous: str | None = None
    instance: str | None = None
    copy = 1
    ids: set[str] = set()
    for thread in threads:
        group = group_of(thread.meta)
        if group is not None and (group != previous or thread.id in ids):
            copy = copy + 1 if group == previous else 1
            ids = set()
            if copy == 1:
                where = thread.meta.get("locator") if isinstance(thread.meta, dict) else None
                instance = f"{group}@{where if isinstance(where, str) else thread.id}"
        ids.add(thread.id)
        previous = group
        if group is None:
            column.append(None)
        else:
            column.append(instance if copy == 1 else f"{instance}#{copy}")
    return column


PREFERENCE_SIDES = ("chosen", "rejected", "desirable", "undesirable")
"""The values of `meta.preference`: a pair's two sides, a KTO completion's label."""


def pair_of(meta: Mapping[str, Any] | None) -> str | None:
    """The pair a thread is a side of (`meta.pair_id`), None when it is in none.

    >>> pair_of({"pair_id": "hh-7", "preference": "chosen"}), pair_of({"group_id": 3})
    ('hh-7', None)
    """
    group = group_of(meta)
    return group.split(":", 1)[1] if group is not None and group.startswith(PAIR + ":") else None


def side_of(meta: Mapping[str, Any] | None) -> str | None:
    """A thread's preference side (PREFERENCE_SIDES), or None."""
    side = meta.get("preference") if isinstance(meta, Mapping) else None
    return side if side in PREFERENCE_SIDES else None


def group_kind(group: str) -> str:
    """`pair` or `group`, for a value of `group_of`."""
    return group.split(":", 1)[0]


def group_runs(groups: Sequence[str | None]) -> list[tuple[int, int]]:
    """The rows of each group as `(start, end)` runs of consecutive rows with the same
    group (a group's threads come from one record, so they are consecutive); threads alone
    are runs of one.

    >>> group_runs(["pair:a", "pair:a", None, None, "group:b"])
    [(0, 2), (2, 3), (3, 4), (4, 5)]
    """
    runs: list[tuple[int, int]] = []
    start = 0
    for row in range(1, len(groups) + 1):
        if row == len(groups) or groups[row] is None or groups[row] != groups[start]:
            runs.append((start, row))
            start = row
    return runs


def whole_groups_end(groups: Sequence[str | None]) -> int:
    """Where a batch of rows may end without cutting a group: before the run of rows
    sharing the last row's group (the whole length when the last row is alone).

    >>> whole_groups_end(["pair:a", "pair:a", "pair:b"]), whole_groups_end(["x", None])
    (2, 2)
    """
    if not groups or groups[-1] is None:
        return len(groups)
    end = len(groups) - 1
    while end > 0 and groups[end - 1] == groups[-1]:
        end -= 1
    return end
