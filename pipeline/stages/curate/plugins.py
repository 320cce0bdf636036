"""Filters a curator writes (`stages.plugins`): each names a Python callable
(`module.path:function`, or the name an installed package registers under the entry point
group `mms_pipeline.filters`) that sees a thread and returns None (keep), a reason (a
string: the thread is dropped under `plugin:NAME:REASON`, or only tagged with `action:
tag`) or a dict of tags (counted, kept in `meta.plugins`). Its `options` are passed as
keyword arguments.

    def no_urls(thread, max_urls=0):
        urls = sum(m.content.count("http") for m in thread.messages)
        return "has urls" if urls > max_urls else None

    stages:
      plugins:
        - {use: "my_filters:no_urls", options: {max_urls: 1}}

A plugin runs in the worker that read the thread, on either engine; it must be importable
there: installed, on PYTHONPATH, or (on Ray, whose workers have the directory the run
starts from on their path) a module in that directory.

The contract, kept whatever a plugin does: it sees a read-only view of the thread
(read_only.py; the thread written is the one it was given, plus `meta.plugins`); what it
returns is checked (None, a non-empty string, or a dict that JSON holds); and each call
may take `timeout` seconds (DEFAULT_TIMEOUT). One that breaks it, raises or exits stops
the run with a PluginError naming it and the thread (finished parts are kept: fix it
and run again to resume)."""

from __future__ import annotations

import dataclasses
import importlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import orjson

from pipeline.mms import Thread
from pipeline.stages.curate.read_only import read_only
from pipeline.stages.curate.tagging import Action, Finding, Tagger
from pipeline.stages.curate.time_limit import TimedOut, call_within

ENTRY_POINTS = "mms_pipeline.filters"
DEFAULT_TIMEOUT = 60.0
"""Seconds a plugin may take on one thread (`timeout`), unless its config says."""


class PluginError(RuntimeError):
    """A plugin that cannot be loaded, or that raised on a thread (the message names it)."""


@dataclass(frozen=True, slots=True)
class PluginSpec:
    """One plugin: what to load, what its reason does, its keyword options, the seconds
    it may take on one thread."""

    use: str
    action: Action = "drop"
    options: tuple[tuple[str, Any], ...] = ()
    timeout: float = DEFAULT_TIMEOUT

    @property
    def name(self) -> str:
        """The plugin's short name (its function's), as reasons and counts give it."""
        return self.use.rsplit(":", 1)[-1].rsplit(".", 1)[-1]


def load_plugin(use: str) -> Callable[..., Any]:
    """The callable `use` names (`module:attribute`, or an entry point's name)."""
    if ":" not in use:
        found = [point for point in entry_points(group=ENTRY_POINTS) if point.name == use]
        if not found:
            raise PluginError(
                f"plugin {use!r}: no `module:function` and no entry point of that name in "
                f"the group {ENTRY_POINTS}"
            )
        return found[0].load()  # type: ignore[no-any-return]
    module, _, attribute = use.partition(":")
    try:
        loaded: Any = importlib.import_module(module)
        for part in attribute.split("."):
            loaded = getattr(loaded, part)
    except (ImportError, AttributeError) as err:
        raise PluginError(f"plugin {use!r} cannot be loaded: {err}") from None
    if not callable(loaded):
        raise PluginError(f"plugin {use!r} is not callable")
    return loaded  # type: ignore[no-any-return]


class Plugins(Tagger):
    """Runs the configured plugins on every thread, in order; the first reason decides.
    Each sees a read-only view of the thread, and what it returns is checked."""

    name = "plugins"

    def __init__(self, specs: tuple[PluginSpec, ...]):
        self.specs = specs
        self.functions = [load_plugin(spec.use) for spec in specs]

    def inspect(self, thread: Thread) -> Finding:
        counts: Counter[str] = Counter()
        tags: dict[str, Any] = {}
        reason = None
        view = read_only(thread)
        for spec, function in zip(self.specs, self.functions, strict=True):
            said = _checked(spec, _called(spec, function, view), thread)
            if isinstance(said, str):
                counts[spec.name] += 1
                if spec.action == "drop" and reason is None:
                    reason = f"plugin:{spec.name}:{said}"
                tags[spec.name] = said
            elif said:
                counts.update({f"{spec.name}:{key}": 1 for key in said})
                tags[spec.name] = said
        if not tags:
            return Finding(thread)
        changed = dataclasses.replace(thread, meta={**thread.meta, "plugins": tags})
        return Finding(changed, reason, counts)


def _named(thread: Thread) -> str:
    """The thread as an error names it: its id and where it came from."""
    where = thread.meta.get("locator") if isinstance(thread.meta, dict) else None
    return f"thread {thread.id} ({where or 'no locator'})"


def _called(spec: PluginSpec, function: Callable[..., Any], view: Thread) -> Any:
    """What the plugin returns for the thread `view`; whatever it raises (an exit too)
    is a PluginError naming it and the thread, and so is a call that takes longer than
    its timeout. An interrupt (Ctrl-C) is not caught."""
    options = dict(spec.options)
    try:
        return call_within(spec.timeout, lambda: function(view, **options))
    except TimedOut:
        raise PluginError(
            f"plugin {spec.use} did not return within its timeout ({spec.timeout:g} s) on "
            f"{_named(view)}"
        ) from None
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as err:
        raise PluginError(
            f"plugin {spec.use} raised {type(err).__name__}: {err} on {_named(view)}"
        ) from err


def _checked(spec: PluginSpec, said: Any, thread: Thread) -> str | dict[str, Any] | None:
    """What the plugin returned, if it is None, a reason (a non-empty string) or tags (a
    dict that JSON holds: kept as read back from JSON, so nothing the plugin keeps a
    reference to can change them later); anything else is a PluginError."""
    if said is None:
        return None
    if isinstance(said, str):
        if not said:
            raise PluginError(
                f"plugin {spec.use} returned an empty reason for {_named(thread)}: "
                "return None to keep the thread"
            )
        return str(said)
    if isinstance(said, dict):
        try:
            tags: dict[str, Any] = orjson.loads(orjson.dumps(said))
        except TypeError as err:
            raise PluginError(
                f"plugin {spec.use} returned tags that are not JSON for {_named(thread)}: {err}"
            ) from None
        return tags
    raise PluginError(
        f"plugin {spec.use} returned {type(said).__name__} for {_named(thread)}: "
        "return None, a reason (a string) or tags (a dict)"
    )
