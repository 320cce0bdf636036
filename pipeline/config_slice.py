"""A stage's slice of a run config (DESIGN §2: each stage is configured by its own slice):
how the slice is read from the config and recorded in the resolved config. Below every
package that declares a slice (the stages, the media check), so declaring one imports
no stage."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

S = TypeVar("S")


class SliceReader(Protocol):
    """What reading a config slice may ask of the config it is in."""

    def error(self, where: Sequence[str | int], reason: str, *, key: bool = False) -> Exception:
        """The error to raise for the key path `where` inside the slice (`key`: point at
        the key, not its value), naming the file and line."""
        ...

    def local(self, path: str) -> str:
        """A path the config writes, made absolute against the config file's folder."""
        ...


OMITTED: Any = object()
"""`ConfigSlice.resolved_off`: a stage that is off leaves its key out of the resolved form."""


def plain_settings(value: Any) -> Any:
    """Settings as plain JSON data: dataclasses as mappings, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain_settings(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [plain_settings(item) for item in value]
    return value


def settings_from_plain(kind: type[S], raw: dict[str, Any]) -> S:
    """Settings from a (schema-checked) slice: its keys as the fields, lists as tuples."""
    return kind(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})


@dataclass(frozen=True)
class ConfigSlice(Generic[S]):
    """A stage's slice of a run config (`stages.<key>`), declared once beside the stage's
    settings: the config reads it, the resolved config (the manifest and the digest a
    resume compares) records it, and tests/test_config_slices.py checks both against the
    slice's part of schemas/pipeline-config.schema.json. Registered by its line in
    pipeline/jobs/run/stages.py."""

    key: str
    settings: type[S]
    on_by_default: bool = True
    """Omitted from the config: the stage runs with its default settings (True) or is off."""
    read: Callable[[Any, SliceReader], S | None] | None = None
    """The settings of the slice's (schema-checked) value, or None when the value turns the
    stage off; checks what a schema cannot (raising `reader.error`). Default: the keys as
    the settings' fields, lists as tuples."""
    plain: Callable[[S, Callable[[str], str]], Any] | None = None
    """The settings as plain data, given how outputs record a local path. Default:
    `plain_settings`."""
    resolved_off: Any = OMITTED
    """What the resolved config records for the stage when it is off."""

    def read_value(self, raw: Any, reader: SliceReader) -> S | None:
        """The settings of the slice's value (an omitted slice is given `{}` when the stage
        is on by default, and not read otherwise)."""
        if self.read is not None:
            return self.read(raw, reader)
        return settings_from_plain(self.settings, raw)

    def default(self) -> S | None:
        """The settings of an omitted slice (without a config to check them against)."""
        return self.settings() if self.on_by_default else None

    def resolve(self, settings: S | None, recorded: Callable[[str], str]) -> Any:
        """The resolved form of the settings (OMITTED: no key)."""
        if settings is None:
            return self.resolved_off
        if self.plain is not None:
            return self.plain(settings, recorded)
        return plain_settings(settings)
