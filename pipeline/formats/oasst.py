"""OpenAssistant (OASST) message trees: one thread per root-to-leaf path, or only the
top-ranked path (`--oasst-paths top`).

Three shapes are read. The tree export (`message_tree_id`, `tree_state`, `prompt` with
nested `replies`), the nested message export (a root message whose `replies` nest), and
flat message exports (one message per record, linked by `parent_id` or, in the backend's
seed data, `parent_message_id` -> `user_message_id`). Flat messages are merged into trees
per file by `group`, streaming: a tree ends where the next one starts (a new
`message_tree_id`, or a new root message when there is none; the root's id is then the
tree id, as in OASST's own exports).

Roles prompter/assistant become user/assistant. Deleted messages and messages that
failed review are left out with their replies, counted in `meta.notes`. A path ending on
a prompter message is kept (its last user turn has no answer) and noted. The thread id
is the leaf message id; `meta` keeps the tree id, the path's message ids and language,
and each message's remaining fields (rank, emojis, labels ...) in `meta.message_meta`.

Example: a message tree and the thread of its one path (prompter is the user).

>>> from pipeline.formats.base import ConvertOptions
>>> from pipeline.sources import Record
>>> tree = {
...     "message_id": "m1", "parent_id": None, "role": "prompter", "text": "Teach me to juggle.",
...     "replies": [{
...         "message_id": "m2", "parent_id": "m1", "role": "assistant",
...         "text": "Start with one ball.", "replies": [],
...     }],
... }
>>> [thread] = to_threads(Record("trees.jsonl", "trees.jsonl:1", tree), ConvertOptions())
>>> thread.id, [(m.role, m.content) for m in thread.messages]
('m2', [('user', 'Teach me to juggle.'), ('assistant', 'Start with one ball.')])
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pipeline.formats.base import ConvertOptions, InputFormat, Sniff
from pipeline.formats.builder import ThreadBuilder, json_kind
from pipeline.mms import Thread
from pipeline.quarantine import RecordRejected, Rejection, raw_text
from pipeline.sources import Record

NAME = "oasst"
ROLES = {"prompter": "user", "assistant": "assistant"}
ID_KEYS = ("message_id", "user_message_id")
PARENT_KEYS = ("parent_id", "parent_message_id")
NOT_MESSAGE_META = frozenset(
    {"text", "role", "replies", "message_tree_id", "deleted", "review_result"}
    | set(ID_KEYS)
    | set(PARENT_KEYS)
)
"""Message fields the thread itself (or `meta.message_ids`) already carries."""
TREE_FIELDS = frozenset({"message_tree_id", "prompt"})


def _plain_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _message_id(message: dict[str, Any]) -> Any:
    """The message's id (`message_id`, or the backend's `user_message_id`), if usable."""
    return next((message[key] for key in ID_KEYS if _plain_id(message.get(key))), None)


def _parent_id(message: dict[str, Any]) -> Any:
    """The id of the message this one replies to, if usable."""
    return next((message[key] for key in PARENT_KEYS if _plain_id(message.get(key))), None)


def _is_message(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("role"), str)
        and value["role"] in ROLES
        and isinstance(value.get("text"), str)
        and _message_id(value) is not None
    )


def _is_flat_message(value: Any) -> bool:
    """A message of a flat export: linked to its parent, its replies in other records
    (its role and text are checked when its tree converts)."""
    return (
        isinstance(value, dict)
        and _message_id(value) is not None
        and not isinstance(value.get("replies"), list)
        and any(key in value for key in PARENT_KEYS)
        and all(value.get(key) is None or _plain_id(value[key]) for key in PARENT_KEYS)
    )


def sniff(value: object) -> Sniff:
    """Sure for a tree (`message_tree_id` + `prompt`) and for OASST messages with nested
    `replies` or a parent link (the `prompter` role is OASST's own)."""
    if not isinstance(value, dict):
        return Sniff(0.0, "not an object")
    if "message_tree_id" in value and isinstance(value.get("prompt"), dict):
        return Sniff(1.0, "OASST message tree: message_tree_id + prompt with replies")
    if _is_message(value) and isinstance(value.get("replies"), list):
        return Sniff(1.0, "OASST message with nested replies")
    if _is_message(value) and _is_flat_message(value):
        score = 1.0 if value["role"] == "prompter" else 0.9
        return Sniff(score, "OASST message linked to its parent (flat export, merged per file)")
    return Sniff(0.0, "no OASST message tree or message (message_id, role prompter/assistant)")


# ----------------------------------------------------------------- flat exports -> trees


@dataclass(slots=True)
class _PendingTree:
    """The flat messages of one tree, in file order, until the file moves on."""

    key: str
    seen_before: bool
    records: list[Record] = field(default_factory=list)

    def flush(self) -> Iterator[Rejection | tuple[Record, tuple[Record, ...]]]:
        """The merged tree (as a tree export record) with its records, and a rejection
        for every record that is not connected to the tree's root."""
        by_id: dict[Any, Record] = {}
        children: dict[Any, list[Record]] = {}
        root: Record | None = None
        for record in self.records:
            message_id = _message_id(record.value)
            if message_id in by_id:
                yield self._reject(record, f"repeats message id {message_id!r} of this tree")
                continue
            by_id[message_id] = record
            parent = _parent_id(record.value)
            if parent is None and root is None:
                root = record
            elif parent is not None:
                children.setdefault(parent, []).append(record)
        if root is None:
            yield from (
                self._reject(r, "belongs to a tree whose root is missing") for r in by_id.values()
            )
            return
        members, nested = self._nest(root, children)
        kept = {id(record) for record in members}
        for record in by_id.values():
            if id(record) not in kept:
                yield self._reject(record, self._orphan_reason(record, root))
        merged = {"message_tree_id": self.key, "prompt": nested}
        yield Record(root.source, root.locator, merged, name=root.name), tuple(members)

    def _nest(
        self, root: Record, children: dict[Any, list[Record]]
    ) -> tuple[list[Record], dict[str, Any]]:
        """The tree under `root` as nested messages (replies in file order) and the
        records it holds, in file order."""
        nested_root = {**root.value, "replies": []}
        reached = [root]
        stack = [(root, nested_root)]
        while stack:
            record, nested = stack.pop()
            for child in children.get(_message_id(record.value), []):
                nested_child = {**child.value, "replies": []}
                nested["replies"].append(nested_child)
                reached.append(child)
                stack.append((child, nested_child))
        order = {id(record): index for index, record in enumerate(self.records)}
        reached.sort(key=lambda record: order[id(record)])
        return reached, nested_root

    def _orphan_reason(self, record: Record, root: Record) -> str:
        parent = _parent_id(record.value)
        if parent is None:
            return f"is a second root of the tree (the first is {_message_id(root.value)!r})"
        return f"replies to {parent!r}, which is not among the messages read with its tree"

    def _reject(self, record: Record, why: str) -> Rejection:
        hint = (
            " (this tree's messages are not contiguous in the file: sort the export by "
            "message_tree_id so each tree is read in one piece)"
            if self.seen_before
            else " (flat exports must keep each tree's messages together)"
        )
        return Rejection(
            record.source,
            record.locator,
            "missing_field",
            f"OASST message {_message_id(record.value)!r} of tree {self.key!r} {why}{hint}",
            raw=raw_text(record.raw, record.value),
            stage=f"normalize:{NAME}",
        )


def group(
    items: Iterator[Record | Rejection],
) -> Iterator[Record | Rejection | tuple[Record, tuple[Record, ...]]]:
    """Merge the flat messages of one file into trees, one tree in memory at a time; a
    tree ends where the next begins (a new `message_tree_id`, else a new root message).
    Everything else passes through."""
    pending: _PendingTree | None = None
    finished: set[str] = set()
    for item in items:
        if not isinstance(item, Record) or not _is_flat_message(item.value):
            yield item
            continue
        value = item.value
        tree_id = value.get("message_tree_id")
        key = str(tree_id if tree_id is not None else _message_id(value))
        if pending is None or (
            key != pending.key if tree_id is not None else _parent_id(value) is None
        ):
            if pending is not None:
                finished.add(pending.key)
                yield from pending.flush()
            pending = _PendingTree(key, key in finished)
        pending.records.append(item)
    if pending is not None:
        yield from pending.flush()


# ----------------------------------------------------------------- trees -> threads


@dataclass(slots=True)
class _Tree:
    """A checked tree: each kept message's children, and what was left out."""

    tree_id: str
    replies: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    left_out: Counter[str] = field(default_factory=Counter)
    left_out_replies: int = 0


def _check_message(message: Any, tree_id: str, where: str) -> None:
    if not isinstance(message, dict):
        raise RecordRejected("missing_field", f"message tree {tree_id}: {where} is not an object")
    name = _message_id(message)
    if name is None:
        raise RecordRejected(
            "missing_field", f"message tree {tree_id}: {where} has no message_id (string)"
        )
    label = f"message tree {tree_id}: message {name!r}"
    if not isinstance(message.get("role"), str) or message["role"] not in ROLES:
        raise RecordRejected(
            "unknown_role",
            f"{label} has role {message.get('role')!r} (expected prompter or assistant)",
        )
    if not isinstance(message.get("text"), str):
        raise RecordRejected("missing_field", f"{label} has no text (expected a string)")
    if not isinstance(message.get("replies", []), list):
        raise RecordRejected("missing_field", f"{label}: replies is not a list")


def _left_out(message: dict[str, Any]) -> str | None:
    if message.get("deleted") is True:
        return "deleted"
    if message.get("review_result") is False:
        return "failed review"
    return None


def _count_below(message: dict[str, Any]) -> int:
    count, stack = 0, list(message.get("replies") or [])
    while stack:
        reply = stack.pop()
        count += 1
        if isinstance(reply, dict):
            stack.extend(reply.get("replies") or [])
    return count


def _read_tree(root: dict[str, Any], tree_id: str) -> _Tree:
    """Check every kept message and collect its kept replies, leaving out deleted and
    failed-review messages with everything below them."""
    tree = _Tree(tree_id)
    _check_message(root, tree_id, "prompt")
    stack = [root]
    while stack:
        message = stack.pop()
        kept = []
        for index, reply in enumerate(message.get("replies") or []):
            _check_message(reply, tree_id, f"a reply ({index}) of {_message_id(message)!r}")
            reason = _left_out(reply)
            if reason is not None:
                tree.left_out[reason] += 1
                tree.left_out_replies += _count_below(reply)
                continue
            kept.append(reply)
        tree.replies[id(message)] = kept
        stack.extend(kept)
    return tree


def _rank_key(indexed: tuple[int, dict[str, Any]]) -> tuple[bool, float, int]:
    """Best-ranked first (rank 0 is best), unranked after ranked, ties in reply order."""
    index, message = indexed
    rank = message.get("rank")
    if isinstance(rank, (int, float)) and not isinstance(rank, bool):
        return (False, rank, index)
    return (True, 0, index)


def _paths(root: dict[str, Any], tree: _Tree, top: bool) -> list[list[dict[str, Any]]]:
    """Root-to-leaf paths in tree order, or the single path of best-ranked replies."""
    if top:
        path = [root]
        while replies := tree.replies[id(path[-1])]:
            path.append(min(enumerate(replies), key=_rank_key)[1])
        return [path]
    paths: list[list[dict[str, Any]]] = []
    stack = [[root]]
    while stack:
        path = stack.pop()
        replies = tree.replies[id(path[-1])]
        if not replies:
            paths.append(path)
        stack.extend([*path, reply] for reply in reversed(replies))
    return paths


def _tree_parts(value: dict[str, Any]) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """The root message, the tree id and the tree-level fields to keep."""
    if "prompt" in value:
        root = value["prompt"]
        if not isinstance(root, dict):
            raise RecordRejected("missing_field", "prompt is not a message object")
        extras = {k: v for k, v in value.items() if k not in TREE_FIELDS}
    elif _is_message(value) and isinstance(value.get("replies"), list):
        root, extras = value, {}
    elif _is_flat_message(value):
        raise RecordRejected(
            "missing_field",
            f"OASST message {_message_id(value)!r} has no replies list: a flat export message "
            "is merged with its tree only when its whole file is read as oasst",
        )
    else:
        keys = ", ".join(list(value)[:8]) or "none"
        raise RecordRejected(
            "missing_field",
            f"expected an OASST message tree (message_tree_id, prompt) or a message with "
            f"role, text and replies; got keys {keys}",
        )
    tree_id = value.get("message_tree_id", _message_id(root))
    return root, str(tree_id), extras


def _message_meta(message: dict[str, Any], lang: Any) -> dict[str, Any]:
    return {
        key: item
        for key, item in message.items()
        if key not in NOT_MESSAGE_META and item is not None and not (key == "lang" and item == lang)
    }


def _thread(
    record: Record,
    options: ConvertOptions,
    path: list[dict[str, Any]],
    tree: _Tree,
    notes: list[str],
    extras: dict[str, Any],
) -> Thread:
    lang = path[0].get("lang")
    meta: dict[str, Any] = {
        "message_tree_id": tree.tree_id,
        "message_ids": [str(_message_id(m)) for m in path],
    }
    if lang is not None:
        meta["lang"] = lang
    builder = ThreadBuilder(record, NAME, options, thread_id=str(_message_id(path[-1])), meta=meta)
    for message in path:
        add = builder.user if message["role"] == "prompter" else builder.assistant
        add(message["text"], meta=_message_meta(message, lang))
    builder.keep_unread(extras)
    for note in notes:
        builder.note(note)
    if path[-1]["role"] == "prompter":
        builder.note(
            "the path ends on a prompter message with no reply: its last user turn is unanswered"
        )
    return builder.build()


def _tree_notes(
    root: dict[str, Any], tree: _Tree, paths: int, options: ConvertOptions
) -> list[str]:
    notes = []
    if tree.left_out:
        counts = " and ".join(f"{n} {why}" for why, n in sorted(tree.left_out.items()))
        notes.append(
            f"left out {counts} message(s) of this tree with their {tree.left_out_replies} replies"
        )
    if _parent_id(root) is not None:
        notes.append(
            f"the record is a subtree: its root replies to {_parent_id(root)!r}, not included"
        )
    if options.oasst_paths == "top":
        others = len(_paths(root, tree, top=False)) - paths
        if others:
            notes.append(
                f"kept the top-ranked path only (--oasst-paths top); {others} other path(s) of this tree left out"
            )
    return notes


def to_threads(record: Record, options: ConvertOptions) -> list[Thread]:
    """One thread per root-to-leaf path of the tree (or the top-ranked path)."""
    value = record.value
    if not isinstance(value, dict):
        kind = f"a JSON {json_kind(value)}"
        raise RecordRejected("not_an_object", f"expected an OASST message tree, got {kind}")
    root, tree_id, extras = _tree_parts(value)
    tree = _read_tree(root, tree_id)
    reason = _left_out(root)
    if reason is not None:
        raise RecordRejected(
            "empty_conversation",
            f"message tree {tree_id}: its root message {_message_id(root)!r} is left out "
            f"({reason}), and with it the whole tree",
        )
    paths = _paths(root, tree, top=options.oasst_paths == "top")
    notes = _tree_notes(root, tree, len(paths), options)
    return [_thread(record, options, path, tree, notes, extras) for path in paths]


FORMAT = InputFormat(
    name=NAME,
    summary="OpenAssistant message trees (tree or message exports, flat exports merged per "
    "file): one thread per root-to-leaf path, or the top-ranked path",
    sniff=sniff,
    to_threads=to_threads,
    group=group,
)
