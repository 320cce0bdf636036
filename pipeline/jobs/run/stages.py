"""The stages of `mms run`, in order, one line each (a line may make several: the curation
stages a config turns on): adding a stage is a module in pipeline/stages/ and a line here. The same list runs on both sides: its map side where each
part is read, its dataset side in the ordered pass (DESIGN §2)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from pipeline.jobs.run.config import RunConfig
from pipeline.lint import LintReport
from pipeline.mms import THREAD_ARROW_SCHEMA
from pipeline.objectives import SCHEMAS
from pipeline.packing import PACKED_SCHEMA
from pipeline.stages.contract import Stage
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


def _lint(config: RunConfig, side: Side) -> Lint:
    """The lint stage; with a tokenize stage, MMS404 flags the special tokens of the run's
    tokenizer too (`<s>`, `<unk>` ...: content spelling them is encoded as text). The
    tokenizer is loaded once per process (the config check has loaded it already)."""
    settings = config.stages.lint
    if config.stages.tokenize is not None:
        specials = renderer_for(config.stages.tokenize)[1].special_tokens
        extra = tuple(dict.fromkeys([*settings.special_tokens, *specials]))
        settings = dataclasses.replace(settings, special_tokens=extra)
    return Lint.from_settings(settings, side.lint_source, side.report)


RUN_STAGES: tuple[Callable[[RunConfig, Side], Stage | list[Stage] | None], ...] = (
    lambda config, side: Sample(side.sample),
    lambda config, side: config.stages.curation.redaction(),
    _lint,
    lambda config, side: MessageFilter(config.stages.filters),
    lambda config, side: config.stages.curation.taggers(),
    lambda config, side: Dedup(config.stages.dedup),
    lambda config, side: (
        Tokenize.from_settings(config.stages.tokenize) if config.stages.tokenize else None
    ),
    lambda config, side: TokenFilter(config.stages.filters) if config.stages.tokenize else None,
    lambda config, side: _objective(config),
    lambda config, side: Pack.from_settings(config.stages.pack) if config.stages.pack else None,
)


def _objective(config: RunConfig) -> ObjectiveStage | None:
    """The objective stage, when the rows are not sft rows."""
    settings = config.stages.tokenize
    if settings is None or settings.objective == "sft":
        return None
    return ObjectiveStage(
        settings.objective, lambda: renderer_for(settings)[0].generation_prompt_ids
    )


def run_stages(config: RunConfig, side: Side) -> list[Stage]:
    """The stages `config` turns on, in run order."""
    stages: list[Stage] = []
    for make in RUN_STAGES:
        built = make(config, side)
        stages += built if isinstance(built, list) else [built] if built is not None else []
    return stages


def row_schema(config: RunConfig) -> pa.Schema:
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


def shard_schema(config: RunConfig) -> pa.Schema:
    """The columns of the run's shards: its kept threads', its objective's rows or,
    packed, the sequences'."""
    if config.stages.pack:
        return PACKED_SCHEMA
    tokenize = config.stages.tokenize
    if tokenize is not None and tokenize.objective != "sft":
        return SCHEMAS[tokenize.objective]
    return row_schema(config)


def part_schema(config: RunConfig, stages: list[Stage]) -> pa.Schema:
    """The columns of a part's threads file: the shard columns, settings, and every
    stage's published columns."""
    schema = row_schema(config)
    if "settings" not in schema.names:
        schema = schema.append(THREAD_ARROW_SCHEMA.field("settings"))
    for stage in stages:
        for column in stage.columns:
            schema = schema.append(column)
    return schema
