"""The files a run writes after its shards (DESIGN §7): the lint reports, the augmented
tokenizer, the stats, the Hugging Face dataset card and, last, the manifest."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa

from pipeline.accounting import Account
from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.decisions import FINDINGS_DIR, Decided
from pipeline.jobs.run.part import PART_INPUT, PART_TOKENIZER
from pipeline.jobs.run.phases import LINT_REPORTS, MANIFEST, STATS_AND_CARD, TOKENIZER
from pipeline.jobs.run.shard_tasks import Written
from pipeline.jobs.run.stages import shard_schema
from pipeline.lint import LintReport
from pipeline.lint.reports import write_report
from pipeline.media.check import MEDIA_DIR
from pipeline.output.card import (
    CardStats,
    Losses,
    SourceRow,
    TokenFigures,
    dataset_card,
    license_fields,
    lint_summary,
    local_dataset_path,
)
from pipeline.output.card_training import training_facts, where_media_are
from pipeline.output.files import (
    atomic_output,
    atomic_text_output,
    discard_if_none,
    remove_stale_temps,
)
from pipeline.output.manifest import (
    CARD_FILE,
    InputRecord,
    build_manifest,
    card_entry,
    file_entries,
    input_record,
    published_files,
    write_manifest,
)
from pipeline.output.shards import Shard
from pipeline.output.tokenizer import TOKENIZER_DIR, shipped_tokenizer_record
from pipeline.quarantine import DROPPED_FILE, REJECTED_FILE
from pipeline.sources.parts import InputPart

if TYPE_CHECKING:
    from pipeline.jobs.stats.compute import ShardTables
    from pipeline.jobs.verify.base import HashFiles

REPORTS = (("lint.json", "json"), ("lint.md", "markdown"), ("lint.html", "html"))


def write_outputs(
    config: RunConfig,
    out: Path,
    name: str,
    parts: list[InputPart],
    decided: Decided,
    written: Written,
    workdir: Path,
    enter: Callable[[str], None],
    hash_files: HashFiles | None = None,
) -> dict[str, Any] | None:
    """The files a run writes after its shards, into `out` (the output folder's staging
    folder), each step entering its phase (`enter`): the lint reports (a quarantine or a
    list of drops that stayed empty removed), the tokenizer (unless the gate failed), the
    stats and the card (when shards were written; `name`: the output folder's), the
    manifest last (its files hashed by `hash_files`: on the engine's workers). The
    manifest's record of the tokenizer (None: none shipped)."""
    counts, report = decided.counts, decided.report
    enter(LINT_REPORTS)
    remove_stale_temps(out)  # a killed worker's half-written shard or media copy
    discard_if_none(out / REJECTED_FILE, counts.quarantined_total)
    discard_if_none(out / DROPPED_FILE, counts.dropped_total)
    reports = write_reports(out, report)
    shutil.rmtree(workdir / FINDINGS_DIR, ignore_errors=True)  # the reports hold them
    tokenizer = None
    if config.stages.tokenize is not None and not decided.gate_failed:
        enter(TOKENIZER)
        media_config = config if decided.media else None
        tokenizer = ship_tokenizer(decided.part_dirs[0] / PART_TOKENIZER, out, media_config)
    packing = written.packing
    enter(STATS_AND_CARD)
    figures = write_stats(out, written.tables, counts, packing)
    if figures is not None:
        reports += STATS_REPORTS
        schema = shard_schema(config, decided.media)
        write_card(
            out, name, config, report, counts, written.shards, schema, tokenizer, packing, figures
        )
    enter(MANIFEST)
    write_run_manifest(
        out,
        config,
        parts,
        decided.part_dirs,
        counts,
        written.shards,
        tokenizer,
        reports,
        report,
        packing,
        written.media_files,
        hash_files,
    )
    return tokenizer


def write_reports(out: Path, report: LintReport) -> list[str]:
    """reports/lint.{json,md,html}; their paths relative to `out`."""
    written = []
    for name, fmt in REPORTS:
        with atomic_text_output(out / "reports" / name) as handle:
            write_report(report, fmt, handle)
        written.append(f"reports/{name}")
    return written


STATS_REPORTS = ("reports/stats.json", "reports/stats.md", "reports/stats.html")


def write_stats(
    out: Path,
    tables: dict[str, list[ShardTables]],
    counts: Account,
    packing: dict[str, Any] | None,
) -> dict[str, Any] | None:
    """reports/stats.{json,md,html}: `mms stats OUT`' figures (of the shards just written,
    from the count tables their tasks made, with tokens per role, and the run's accounting
    as the manifest will give it), returned for the card; none without shards."""
    if not tables:
        return None
    from pipeline.jobs.stats import figures_of_counts, stats_json
    from pipeline.jobs.stats.compute import split_figures
    from pipeline.output.stats_html import stats_html
    from pipeline.output.stats_markdown import stats_markdown

    splits = {split: split_figures(tables[split]) for split in sorted(tables)}
    stats: dict[str, Any] = {"splits": splits}
    stats["run"] = figures_of_counts(counts.to_dict(), packing)
    texts = (stats_json(stats), stats_markdown(stats), stats_html(stats))
    for name, text in zip(STATS_REPORTS, texts, strict=True):
        with atomic_text_output(out / name) as handle:
            handle.write(text)
    return stats


def ship_tokenizer(
    part_tokenizer: Path, out: Path, media_config: RunConfig | None = None
) -> dict[str, Any]:
    """tokenizer/ (the augmented tokenizer and its special ids, as the first part
    wrote them), copied into the output; the manifest's record of it. `media_config`: the
    run's config when its rows hold media: the tokenizer is then written again with the
    media placeholders (DESIGN §4), the base recorded as the part recorded it."""
    for file in sorted(part_tokenizer.iterdir()):
        with atomic_output(out / TOKENIZER_DIR / file.name) as target:
            target.write(file.read_bytes())
    if media_config is not None and media_config.stages.tokenize is not None:
        from pipeline.output.tokenizer import SPECIAL_TOKENS_FILE, write_tokenizer
        from pipeline.stages.tokenize import renderer_for

        record = orjson.loads((part_tokenizer / SPECIAL_TOKENS_FILE).read_bytes())
        renderer, base = renderer_for(media_config.stages.tokenize)
        shown = record["base_tokenizer"]["path"]
        write_tokenizer(out / TOKENIZER_DIR, renderer, base, base_path=shown, media=True)
    return shipped_tokenizer_record(out)


def write_run_manifest(
    out: Path,
    config: RunConfig,
    parts: list[InputPart],
    part_dirs: list[Path],
    counts: Account,
    shards: dict[str, list[Shard]],
    tokenizer: dict[str, Any] | None,
    reports: list[str],
    report: LintReport,
    packing: dict[str, Any] | None = None,
    media: dict[str, int] | None = None,
    hash_files: HashFiles | None = None,
) -> None:
    """manifest.json, written last: whether the gate passed, inputs with their sha256, the
    resolved config, versions, counts, shards, tokenizer, reports, every other published
    file with its sha256 (`files`: the card too, and the media copied under media/, whose
    content-addressed names are their sha256: `media` gives their sizes, so they are not
    read again here) and, with a pack stage, packing."""
    known = {
        f"{MEDIA_DIR}/{name}": (size, name.split(".", 1)[0]) for name, size in (media or {}).items()
    }
    manifest = build_manifest(
        inputs=input_records(config, parts, part_dirs),
        config=config.resolved(),
        config_digest=config.digest(),
        counts=counts.to_dict(),
        shards=shards,
        tokenizer=tokenizer,
        reports=reports,
        gate=gate_record(report, config.stages.lint.fail_on),
        files=file_entries(out, published_files(out), known, hash_files),
        card=card_entry(out),
    )
    if packing is not None:
        manifest["packing"] = packing
    write_manifest(out / "manifest.json", manifest)


def gate_record(report: LintReport, fail_on: str) -> dict[str, Any]:
    """The manifest's `gate`: passed or not, at which level, and the findings that failed
    it (code, severity, count on kept threads, where the first is)."""
    failing = report.gate_findings(fail_on)
    return {
        "passed": not failing,
        "fail_on": fail_on,
        "failed_by": [
            {
                "code": code,
                "severity": severity,
                "count": count,
                "first": first.locator or first.source or "",
            }
            for code, severity, count, first in failing
        ],
    }


def input_records(
    config: RunConfig, parts: list[InputPart], part_dirs: list[Path] | None = None
) -> list[InputRecord]:
    """The manifest's record of every input file (sha256, bytes), named as the config does:
    as each file's first part recorded it in `part_dirs` (the workers hash the inputs),
    else hashed here."""
    written = dict(zip((part.id for part in parts), part_dirs or (), strict=False))
    records = []
    for part in _whole_files(parts):
        stored = written[part.id] / PART_INPUT if part.id in written else None
        if stored is not None and stored.is_file():
            records.append(InputRecord(**orjson.loads(stored.read_bytes())))
        else:
            shown = config.recorded_path(part.path)
            records.append(input_record(part.path, part.format, recorded_as=shown))
    return records


def _whole_files(parts: list[InputPart]) -> list[InputPart]:
    """One part per input file (a split file's first part stands for the file)."""
    return list({part.path: part for part in reversed(parts)}.values())[::-1]


def write_card(
    out: Path,
    name: str,
    config: RunConfig,
    report: LintReport,
    counts: Account,
    shards: dict[str, list[Shard]],
    schema: pa.Schema,
    tokenizer: dict[str, Any] | None,
    packing: dict[str, Any] | None,
    figures: dict[str, Any],
) -> None:
    """README.md in `out`: the dataset card (front matter with configs and features, the
    headline figures, how to load it and train on it; `name`: the output folder's). `tokenizer` is the manifest's record of the
    shipped tokenizer, None when the run did not tokenize; `figures` what write_stats
    found."""
    tags = sorted({tag for spec in config.inputs for tag in spec.tags} | {"mms"})
    stats = _card_stats(config, report, counts, shards, tokenizer, packing, figures)
    card = dataset_card(
        name=config.name,
        description=f"MMS threads built by `mms run` from {len(config.inputs)} input(s).",
        license=license_fields([spec.license for spec in config.inputs]),
        sources=[config.recorded_path(spec.path) for spec in config.inputs],
        languages=sorted({language for spec in config.inputs for language in spec.language}),
        tags=tags,
        splits={name: [f"data/{s.name}" for s in split] for name, split in shards.items()},
        features=schema,
        stats=stats,
        how_to_load=local_dataset_path(name),
    )
    with atomic_text_output(out / CARD_FILE) as handle:
        handle.write(card)


def _card_stats(
    config: RunConfig,
    report: LintReport,
    counts: Account,
    shards: dict[str, list[Shard]],
    tokenizer: dict[str, Any] | None,
    packing: dict[str, Any] | None,
    figures: dict[str, Any],
) -> CardStats:
    """The figures the card states (write_card's arguments)."""
    renderer = tokenizer["renderer"] if tokenizer else None
    profile = report.profile
    stats: CardStats = {
        "threads": sum(counts.written.values()),
        "rows": {name: sum(s.rows for s in split) for name, split in shards.items()},
        "bytes": {name: sum(s.bytes for s in split) for name, split in shards.items()},
        "renderer": renderer,
        "tokens": counts.tokens if renderer else None,
        "trained_tokens": counts.trained_tokens if renderer else None,
        "training": (
            training_facts(
                tokenizer,
                counts.zero_weight_messages,
                _objective(config),
                _media_cells(config, packed=packing is not None),
                packed=packing is not None,
            )
            if tokenizer
            else None
        ),
        "packing": packing,
        "formats": dict(profile.formats),
        "capabilities": profile.capabilities(),
        "lint": lint_summary(report),
        "sources": _source_rows(counts, tokenized=bool(renderer)),
    }
    stats["gate"] = config.stages.lint.fail_on
    stats["quarantined"] = counts.quarantined_total
    stats["losses"] = _losses(counts)
    stats["reports"] = list(STATS_REPORTS)
    if renderer is not None and packing is None and _objective(config) == "sft":
        stats["split_tokens"] = {
            name: _token_figures(split) for name, split in figures["splits"].items()
        }
    return stats


def _source_rows(counts: Account, *, tokenized: bool) -> list[SourceRow]:
    """The card's row of each input: what it gave (tokens when the run tokenized)."""
    return [
        SourceRow(
            path=source.path,
            license=source.license,
            records_read=source.records_read,
            quarantined=source.quarantined,
            written=source.written,
            tokens=source.tokens if tokenized else None,
            main_loss=source.main_loss(),
        )
        for source in counts.inputs
    ]


def _losses(counts: Account) -> Losses:
    """What the card says was lost or set apart: duplicates, truncation, groups, tags."""
    return Losses(
        exact_duplicates=counts.dropped.get("duplicate", 0),
        near_duplicates=counts.dropped.get("near_duplicate", 0),
        truncated=counts.truncated,
        tokens_truncated=counts.tokens_truncated,
        groups_kept=dict(counts.groups_kept),
        groups_dropped=dict(counts.groups_dropped),
        tagged=dict(counts.tagged),
    )


def _media_cells(config: RunConfig, *, packed: bool) -> str:
    """What the run's media cells hold (the card's sentence; `packed` rows keep no `meta`)."""
    media = config.stages.media
    if media is None:
        return where_media_are(embedded=False, copied=False)
    return where_media_are(
        media.stages_copies and media.embed, media.reads and media.copy, checked_meta=not packed
    )


def _objective(config: RunConfig) -> str:
    """What the run's rows are (pipeline/objectives)."""
    tokenize = config.stages.tokenize
    return tokenize.objective if tokenize is not None else "sft"


def _token_figures(split: dict[str, Any]) -> TokenFigures:
    """A split's token figures, as `mms stats` found them."""
    return TokenFigures(
        tokens=split["tokens"],
        trained=split["trained_tokens"],
        p50=split["length_p50"],
        p90=split["length_p90"],
        p99=split["length_p99"],
        max=split["length_max"],
    )
