"""The curation slices of a config (`stages.pii`, `language`, `quality`, `decontaminate`,
`plugins`; schemas/pipeline-config.schema.json checks them first), read into the stages'
settings, and the stages they make, in their order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.config_slice import ConfigSlice, S, SliceReader, plain_settings, settings_from_plain
from pipeline.curation.quality import QualitySettings
from pipeline.stages.contract import Stage
from pipeline.stages.curate.decontaminate import Decontaminate, DecontaminateSettings
from pipeline.stages.curate.language import Language, LanguageSettings
from pipeline.stages.curate.pii import Pii, PiiSettings
from pipeline.stages.curate.plugins import (
    DEFAULT_TIMEOUT,
    PluginError,
    Plugins,
    PluginSpec,
    load_plugin,
)
from pipeline.stages.curate.quality import Quality, QualityStageSettings


def _read_quality(raw: dict[str, Any], reader: SliceReader) -> QualityStageSettings:
    raw = dict(raw)
    action = raw.pop("action", "tag")
    return QualityStageSettings(settings_from_plain(QualitySettings, raw), action)


def _read_decontaminate(raw: dict[str, Any], reader: SliceReader) -> DecontaminateSettings:
    """The evaluation inputs' paths made absolute (against the config's folder)."""
    against = tuple(reader.local(path) for path in raw.get("against", ()))
    return DecontaminateSettings(**{**raw, "against": against})


def _read_plugins(raw: list[dict[str, Any]], reader: SliceReader) -> tuple[PluginSpec, ...] | None:
    """The plugins, each loaded once here, so that one that cannot be is an error at its
    line; none: the stage is off."""
    specs = tuple(
        PluginSpec(
            spec["use"],
            spec.get("action", "drop"),
            tuple(sorted((spec.get("options") or {}).items())),
            float(spec.get("timeout", DEFAULT_TIMEOUT)),
        )
        for spec in raw
    )
    for index, spec in enumerate(specs):
        try:
            load_plugin(spec.use)
        except PluginError as err:
            raise reader.error([index, "use"], str(err)) from None
    return specs or None


PII = ConfigSlice("pii", PiiSettings, on_by_default=False)
LANGUAGE = ConfigSlice("language", LanguageSettings, on_by_default=False)
QUALITY = ConfigSlice(
    "quality",
    QualityStageSettings,
    on_by_default=False,
    read=_read_quality,
    # as the config writes it: the thresholds and the action
    plain=lambda q, recorded: {**plain_settings(q.rules), "action": q.action},
)
DECONTAMINATE = ConfigSlice(
    "decontaminate",
    DecontaminateSettings,
    on_by_default=False,
    read=_read_decontaminate,
    plain=lambda d, recorded: {
        **plain_settings(d),
        "against": [recorded(path) for path in d.against],
    },
)
PLUGINS: ConfigSlice[tuple[PluginSpec, ...]] = ConfigSlice(
    "plugins",
    tuple,
    on_by_default=False,
    read=_read_plugins,
    plain=lambda specs, recorded: [
        {"use": p.use, "action": p.action, "options": dict(p.options), "timeout": p.timeout}
        for p in specs
    ],
)
"""Its settings are the tuple of the plugins' specs (each as the config writes it)."""

CURATION_SLICES = (PII, LANGUAGE, QUALITY, DECONTAMINATE, PLUGINS)
SLICES = tuple(curation.key for curation in CURATION_SLICES)
"""The config keys of the curation stages."""


class _Paths:
    """Reads a curation file's slices: paths against `resolve`; a problem a PluginError."""

    def __init__(self, resolve: Callable[[str], str]):
        self.resolve = resolve

    def error(self, where: Sequence[str | int], reason: str, *, key: bool = False) -> Exception:
        return PluginError(reason)

    def local(self, path: str) -> str:
        return self.resolve(path)


@dataclass(frozen=True, slots=True)
class CurationSettings:
    """Which curation stages run, with their settings (None, or no plugin: not run)."""

    pii: PiiSettings | None = None
    language: LanguageSettings | None = None
    quality: QualityStageSettings | None = None
    decontaminate: DecontaminateSettings | None = None
    plugins: tuple[PluginSpec, ...] = ()

    @classmethod
    def from_config(
        cls, stages: dict[str, Any], resolve: Callable[[str], str] = str
    ) -> CurationSettings:
        """The settings of a curation file's (schema-checked) slices, read as a run config
        reads them; `resolve` makes the evaluation inputs' paths absolute (relative to the
        file's folder). Raises PluginError for a plugin that cannot be loaded."""
        reader = _Paths(resolve)

        def read(curation: ConfigSlice[S]) -> S | None:
            if curation.key not in stages:
                return None
            return curation.read_value(stages[curation.key], reader)

        return cls(
            pii=read(PII),
            language=read(LANGUAGE),
            quality=read(QUALITY),
            decontaminate=read(DECONTAMINATE),
            plugins=read(PLUGINS) or (),
        )

    def redaction(self) -> list[Stage]:
        """The stage that rewrites threads (before any other looks at them)."""
        return [Pii(self.pii)] if self.pii is not None else []

    def taggers(self) -> list[Stage]:
        """The stages that tag and drop, in order."""
        stages: list[Stage] = []
        if self.language is not None:
            stages.append(Language(self.language))
        if self.quality is not None:
            stages.append(Quality(self.quality))
        if self.decontaminate is not None:
            stages.append(Decontaminate(self.decontaminate))
        if self.plugins:
            stages.append(Plugins(self.plugins))
        return stages
