"""The stages of `mms run`, in run order, one line each: adding a stage is a module in
pipeline/stages/ (its settings, its `ConfigSlice` and its `Stage`) and a line here. A line
registers the stage's config slice (the run config reads `stages.<key>` with it, and records
it in the resolved config) and builds the stage from its settings. The same list runs on
both sides: its map side where each part is read, its dataset side in each part's task
after the rows whose keys repeat (DESIGN §2, §7)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from pipeline.config_slice import ConfigSlice
from pipeline.lint import LintReport
from pipeline.media import settings as media
from pipeline.mms import MEDIA_COLUMN, THREAD_ARROW_SCHEMA, THREAD_MEDIA_ARROW_SCHEMA
from pipeline.mms.media_columns import kind_fields, media_fields, parts_schema
from pipeline.objectives import SCHEMAS
from pipeline.packing import PACKED_SCHEMA
from pipeline.stages import dedup, filters, lint, normalize, pack, split, tokenize
from pipeline.stages.contract import Stage
from pipeline.stages.curate import settings as curate
from pipeline.stages.curate.decontaminate import Decontaminate
from pipeline.stages.curate.language import Language
from pipeline.stages.curate.pii import Pii
from pipeline.stages.curate.plugins import Plugins
from pipeline.stages.curate.quality import Quality
from pipeline.stages.curate.settings import CurationSettings
from pipeline.stages.dedup import Dedup
from pipeline.stages.filters import MessageFilter, TokenFilter
from pipeline.stages.lint import Lint
from pipeline.stages.objective import ObjectiveStage
from pipeline.stages.pack import Pack
from pipeline.stages.sample import Sample
from pipeline.stages.tokenize import Tokenize, renderer_for
from pipeline.tokenize.tables import PROMPT_MESSAGES, PROMPT_TOKENS, TOKENIZED_SCHEMA


@dataclass(frozen=True)
class Side:
    """What a stage is built for beyond its config slice: the part's input sample fraction
    (map side), where lint findings point for the config, the run's report (dataset side)."""

    sample: float = 1.0
    lint_source: str | None = None
    report: LintReport | None = None
    resolving: bool = False
    """Built for a run's pass over the rows whose keys repeat, which records nothing (each
    part's task does): lint then needs only what its keyed rules say there."""


def _lint(settings: lint.LintSettings, stages: Stages, side: Side) -> Lint:
    """The lint stage; with a tokenize stage, MMS404 flags the special tokens of the run's
    tokenizer too (`<s>`, `<unk>` ...: content spelling them is encoded as text). The
    tokenizer is loaded once per process (the config check has loaded it already)."""
    if stages.tokenize is not None:
        specials = renderer_for(stages.tokenize)[1].special_tokens
        extra = tuple(dict.fromkeys([*settings.special_tokens, *specials]))
        settings = dataclasses.replace(settings, special_tokens=extra)
    return Lint.from_settings(settings, side.lint_source, side.report, keyed_only=side.resolving)


def _objective(stages: Stages) -> ObjectiveStage | None:
    """The objective stage, when the rows are not sft rows."""
    settings = stages.tokenize
    if settings is None or settings.objective == "sft":
        return None
    return ObjectiveStage(
        settings.objective, lambda: renderer_for(settings)[0].generation_prompt_ids
    )


Build = Callable[[Any, "Stages", Side], "Stage | None"]
"""Makes a stage from its slice's settings (None: the slice is off, and the stage is built
only when `always`), the run's settings of every slice, and the side it runs on."""


@dataclass(frozen=True)
class Step:
    """One line of RUN_STAGES: a config slice (or none), and the stage made of it (or none:
    the slice is read elsewhere, by the map side's reading or the parts' split)."""

    slice: ConfigSlice[Any] | None = None
    build: Build | None = None
    always: bool = False
    """Build even when the slice is off (or there is none)."""
    reshapes: bool = False
    """The stage reshapes the rows a split keeps (`Stage.reshape`): the shard tasks build
    it alone (`reshaping_stages`)."""


RUN_STAGES: tuple[Step, ...] = (
    Step(normalize.CONFIG),  # read side: records -> threads, pipeline/jobs/run/part.py
    Step(media.CONFIG),  # read side: media checked (and copied) as records are read
    Step(None, lambda _, stages, side: Sample(side.sample), always=True),
    Step(curate.PII, lambda settings, *_: Pii(settings)),
    Step(lint.CONFIG, _lint),
    Step(filters.CONFIG, lambda settings, *_: MessageFilter(settings)),
    Step(curate.LANGUAGE, lambda settings, *_: Language(settings)),
    Step(curate.QUALITY, lambda settings, *_: Quality(settings)),
    Step(curate.DECONTAMINATE, lambda settings, *_: Decontaminate(settings)),
    Step(curate.PLUGINS, lambda settings, *_: Plugins(settings)),
    Step(dedup.CONFIG, lambda settings, *_: Dedup(settings)),
    Step(tokenize.CONFIG, lambda settings, *_: Tokenize.from_settings(settings)),
    Step(
        None,
        lambda _, stages, side: TokenFilter(stages.filters) if stages.tokenize else None,
        always=True,
    ),
    Step(None, lambda _, stages, side: _objective(stages), always=True, reshapes=True),
    Step(split.CONFIG),  # the split, in each part's task: pipeline/jobs/run/decisions.py
    Step(pack.CONFIG, lambda settings, *_: Pack.from_settings(settings), reshapes=True),
)

CONFIG_SLICES: tuple[ConfigSlice[Any], ...] = tuple(
    step.slice for step in RUN_STAGES if step.slice is not None
)
"""Every slice of a run config's `stages:`, in run order."""


class Stages:
    """Each stage's settings by the key of its config slice, read as an attribute
    (`stages.lint`; None: the stage is off), every slice of CONFIG_SLICES there (an omitted
    one with its default); `curation` gives the curation slices together."""

    __slots__ = ("_settings",)

    def __init__(self, settings: Mapping[str, Any] | None = None):
        given = dict(settings or {})
        unknown = set(given) - {config.key for config in CONFIG_SLICES}
        if unknown:
            raise TypeError(f"no stage reads the config slice(s) {sorted(unknown)}")
        full = {
            config.key: given[config.key] if config.key in given else config.default()
            for config in CONFIG_SLICES
        }
        object.__setattr__(self, "_settings", full)

    def __getattr__(self, key: str) -> Any:
        try:
            return object.__getattribute__(self, "_settings")[key]
        except KeyError:
            raise AttributeError(f"no config slice {key!r}") from None

    def __setattr__(self, key: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {key!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Stages, (self._settings,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stages) and self._settings == other._settings

    def __hash__(self) -> int:
        return hash(tuple(self._settings.items()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={value!r}" for key, value in self._settings.items())
        return f"Stages({shown})"

    def items(self) -> list[tuple[str, Any]]:
        """(key, settings) of every slice, in run order."""
        return list(self._settings.items())

    def replace(self, **changes: Any) -> Stages:
        """A copy with the settings of some slices changed."""
        return Stages({**self._settings, **changes})

    @property
    def curation(self) -> CurationSettings:
        """The curation slices (pii, language, quality, decontaminate, plugins)."""
        return CurationSettings(
            pii=self.pii,
            language=self.language,
            quality=self.quality,
            decontaminate=self.decontaminate,
            plugins=self.plugins or (),
        )


class HasStages(Protocol):
    """What the functions below read of a run config: its stages' settings."""

    @property
    def stages(self) -> Stages: ...


def run_stages(config: HasStages, side: Side) -> list[Stage]:
    """The stages `config` turns on, in run order."""
    return _built(config, side, RUN_STAGES)


def reshaping_stages(config: HasStages) -> list[Stage]:
    """The stages `config` turns on that reshape the rows a split keeps, in run order,
    built without the others (a shard task needs only these, and loads no tokenizer for
    the rest)."""
    return _built(config, Side(), tuple(step for step in RUN_STAGES if step.reshapes))


def _built(config: HasStages, side: Side, steps: tuple[Step, ...]) -> list[Stage]:
    built: list[Stage] = []
    for step in steps:
        settings = getattr(config.stages, step.slice.key) if step.slice else None
        if step.build is None or (settings is None and not step.always):
            continue
        stage = step.build(settings, config.stages, side)
        if stage is not None:
            built.append(stage)
    return built


def row_schema(config: HasStages) -> pa.Schema:
    """The columns of the threads a run keeps (tokenized or not; for an objective other
    than sft, with their settings and where their prompt ends, which its rows are cut
    from)."""
    tokenize = config.stages.tokenize
    if tokenize is None:
        return THREAD_ARROW_SCHEMA
    if tokenize.objective == "sft":
        return TOKENIZED_SCHEMA
    settings = THREAD_ARROW_SCHEMA.field("settings")
    cuts = [pa.field(PROMPT_TOKENS, pa.int32()), pa.field(PROMPT_MESSAGES, pa.int32())]
    return pa.schema([*TOKENIZED_SCHEMA, settings, *cuts])


def shard_schema(config: HasStages, media: Sequence[str] = ()) -> pa.Schema:
    """The columns of the run's shards: its kept threads', its objective's rows or,
    packed, the sequences'. A run whose rows hold `media` (kinds) adds a list column per
    kind (pipeline/mms/media_columns.py), after the threads' media column on rows of
    threads (an objective's row and a packed sequence are no thread: DESIGN §7), and its
    message columns hold each content as its list of parts (`parts_schema`)."""
    tokenize = config.stages.tokenize
    if config.stages.pack:
        schema, added = PACKED_SCHEMA, kind_fields(media)
    elif tokenize is not None and tokenize.objective != "sft":
        schema, added = SCHEMAS[tokenize.objective], kind_fields(media)
    else:
        schema, added = row_schema(config), media_fields(media) if media else []
    for column in added:
        schema = schema.append(column)
    return parts_schema(schema) if media else schema


def part_schema(config: HasStages, stages: list[Stage]) -> pa.Schema:
    """The columns of a part's threads file: the shard columns, settings, the threads'
    media (DESIGN §3; null for a thread without), and every stage's published columns."""
    schema = row_schema(config)
    if "settings" not in schema.names:
        schema = schema.append(THREAD_ARROW_SCHEMA.field("settings"))
    schema = schema.append(THREAD_MEDIA_ARROW_SCHEMA.field(MEDIA_COLUMN))
    for stage in stages:
        for column in stage.columns:
            schema = schema.append(column)
    return schema
