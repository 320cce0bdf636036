"""The curation slices of a config (`stages.pii`, `language`, `quality`, `decontaminate`,
`plugins`; schemas/pipeline-config.schema.json checks them first), read into the stages'
settings, and the stages they make, in their order."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipeline.curation.quality import QualitySettings
from pipeline.stages.contract import Stage
from pipeline.stages.curate.decontaminate import Decontaminate, DecontaminateSettings
from pipeline.stages.curate.language import Language, LanguageSettings
from pipeline.stages.curate.pii import Pii, PiiSettings
from pipeline.stages.curate.plugins import Plugins, PluginSpec
from pipeline.stages.curate.quality import Quality, QualityStageSettings

SLICES = ("pii", "language", "quality", "decontaminate", "plugins")
"""The config keys of the curation stages."""


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
        """The settings of a config's (schema-checked) `stages` mapping; `resolve` makes
        the evaluation inputs' paths absolute (relative to the config's folder)."""
        quality = None
        if "quality" in stages:
            raw = dict(stages["quality"])
            action = raw.pop("action", "tag")
            if "refusal_phrases" in raw:
                raw["refusal_phrases"] = tuple(raw["refusal_phrases"])
            if "rules" in raw:
                raw["rules"] = tuple(raw["rules"])
            quality = QualityStageSettings(QualitySettings(**raw), action)
        decontaminate = None
        if "decontaminate" in stages:
            raw = dict(stages["decontaminate"])
            raw["against"] = tuple(resolve(path) for path in raw.get("against", ()))
            decontaminate = DecontaminateSettings(**raw)
        return cls(
            pii=_settings(PiiSettings, stages.get("pii"), kinds=tuple),
            language=_settings(LanguageSettings, stages.get("language"), languages=tuple),
            quality=quality,
            decontaminate=decontaminate,
            plugins=tuple(
                PluginSpec(
                    spec["use"],
                    spec.get("action", "drop"),
                    tuple(sorted((spec.get("options") or {}).items())),
                )
                for spec in stages.get("plugins", ())
            ),
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

    def to_plain(self) -> dict[str, Any]:
        """The slices set, as plain data (for a manifest and its config digest)."""
        plain: dict[str, Any] = {}
        for name in ("pii", "language", "decontaminate"):
            value = getattr(self, name)
            if value is not None:
                plain[name] = _plain(value)
        if self.quality is not None:  # as the config writes it: the thresholds and the action
            plain["quality"] = {**_plain(self.quality.rules), "action": self.quality.action}
        if self.plugins:
            plain["plugins"] = [
                {"use": p.use, "action": p.action, "options": dict(p.options)} for p in self.plugins
            ]
        return plain


def _settings(kind: type, raw: dict[str, Any] | None, **tuples: Callable[[Any], Any]) -> Any:
    if raw is None:
        return None
    values = {key: tuples[key](value) if key in tuples else value for key, value in raw.items()}
    return kind(**values)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value
