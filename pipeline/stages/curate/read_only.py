"""A read-only view of a thread, for code that must look at it and not change it (a
curator's plugin): the same classes and values (a Thread, a list of frozen Messages, a dict
of `meta`), but every attempt to change them raises, so what a stage writes is the thread
as it was. Copies (`dict(view.meta)`, `copy.deepcopy(view)`) are ordinary, changeable
values."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, NoReturn

from pipeline.mms import Message, SystemSettings, Thread

READ_ONLY = "a plugin sees a read-only thread: return a reason or tags instead of changing it"


def _refuse(*_: object, **__: object) -> NoReturn:
    """What every changing method of a read-only value does."""
    raise TypeError(READ_ONLY)


class ReadOnlyDict(dict[str, Any]):
    """A dict whose items cannot be set or removed; its copies are plain dicts."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}


class ReadOnlyList(list[Any]):
    """A list whose items cannot be set, added or removed; its copies are plain lists."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = remove = pop = clear = sort = reverse = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(value, memo) for value in self]


class ReadOnlyThread(Thread):
    """A Thread whose fields cannot be set; built by `read_only`."""

    __slots__ = ()

    def __init__(
        self,
        id: str,
        messages: list[Message],
        settings: SystemSettings | None = None,
        meta: dict[str, Any] | None = None,
    ):
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "messages", ReadOnlyList(messages))
        object.__setattr__(self, "settings", _read_only_settings(settings))
        object.__setattr__(self, "meta", read_only_value(meta or {}))

    __setattr__ = __delattr__ = _refuse

    def __deepcopy__(self, memo: dict[int, Any]) -> Thread:
        return Thread(
            self.id,
            copy.deepcopy(self.messages, memo),
            copy.deepcopy(self.settings, memo),
            copy.deepcopy(self.meta, memo),
        )


def read_only(thread: Thread) -> ReadOnlyThread:
    """A view of `thread` nothing can change through: its messages (frozen already) in a
    read-only list, its meta read-only all the way down; the strings are shared, the
    containers are new (as cheap as a shallow copy of each)."""
    return ReadOnlyThread(thread.id, thread.messages, thread.settings, thread.meta)


def read_only_value(value: Any) -> Any:
    """A JSON-like value with every dict and list in it made read-only."""
    if isinstance(value, dict):
        return ReadOnlyDict({key: read_only_value(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return ReadOnlyList(read_only_value(item) for item in value)
    return value


def _read_only_settings(settings: SystemSettings | None) -> SystemSettings | None:
    """The settings (frozen) with each format's sampler object made read-only."""
    if settings is None or not any(isinstance(f.sampler, dict) for f in settings.formats):
        return settings
    formats = tuple(
        dataclasses.replace(f, sampler=read_only_value(f.sampler)) for f in settings.formats
    )
    return SystemSettings(formats)
