"""`mms verify` of a packed output (DESIGN §7), `check_packed_output`. Every packed row is
checked as packed: lengths that add up, positions restarting at 0 for every thread, labels
that are -100 or the token, one media per placeholder, and (an `mms pack` output) the
thread counts its manifest gives against its rows and its drop list.

A packed sequence holds no messages, so its threads are checked on the rows the pack read:
the output it was packed from (`--source`, else the folder its manifest's inputs name,
beside the packed one), taken only when its shards are the very files the manifest lists
(sha256). Those rows are rendered again (renderer and chat template) as any SFT row is,
and matched to the packed threads (packed_match.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from pipeline.jobs.verify.base import Problem, Verification
from pipeline.jobs.verify.packed_match import Expected, dropped_threads, match_threads
from pipeline.jobs.verify.rows import check_rows, media_problem, read_rows, shipped_placeholders
from pipeline.jobs.verify.template import TemplateCheck, check_template
from pipeline.output.files import file_sha256
from pipeline.output.shards import split_files
from pipeline.output.tokenizer import shipped_renderer
from pipeline.quarantine import DROPPED_FILE
from pipeline.tokenize import IGNORE, TokenizerLoadError


def check_packed_output(
    out: Path,
    manifest: dict[str, Any],
    shards: list[tuple[str, Path]],
    result: Verification,
    *,
    source: Path | None,
    render: bool,
    template: bool,
    progress: Callable[[str, int], None] | None,
) -> None:
    """Check the packed output `out` (see the module docstring): its rows as packed, its
    counts, and with its source its threads against the rows they were packed from."""
    placeholders = shipped_placeholders(out) or {}
    threads = _check_structure(shards, result, placeholders)
    packing = _pack_config(manifest)
    if packing is None:
        result.notes.append(
            "packed rows: checked as packed (positions, lengths, labels, media); a run's "
            "packed threads keep no messages, so they are not rendered again"
        )
        return
    _check_counts(out, manifest, threads, result)
    splits = _source_splits(out, manifest, source, result)
    if splits is None:
        return
    labelled = [(f"source {split}", path) for split, paths in splits.items() for path in paths]
    if render:
        check_rows(out, labelled, result, progress)
    if template:
        check_template(out, labelled, result)
    try:
        renderer = shipped_renderer(out / "tokenizer")
    except TokenizerLoadError as err:
        result.problems.append(Problem("tokenizer/", str(err)))
        return
    check = TemplateCheck.load(out / "tokenizer", result) if template else None
    expected = Expected(*packing, renderer, placeholders, check)
    for split, paths in splits.items():
        for path in paths:
            expected.read(split, path, result)
    match_threads(out, shards, expected, placeholders, result)


def _check_structure(
    shards: list[tuple[str, Path]], result: Verification, placeholders: dict[int, str]
) -> int:
    """Every packed row holds whole threads and one media per placeholder; the threads
    the rows hold, in all."""
    threads = 0
    for split, rows in read_rows(shards):
        for index, row in enumerate(rows):
            where = f"{split} packed row {index} ({', '.join(row['ids'][:2])} ...)"
            what = _packed_problem(row) or media_problem(row, placeholders)
            if what:
                result.problems.append(Problem(where, what))
            threads += len(row["ids"])
        result.count("packed rows checked", len(rows))
    return threads


def _packed_problem(row: dict[str, Any]) -> str | None:
    """What does not hold in one packed row's lengths, positions and labels."""
    lengths, tokens = row["seq_lens"], row["input_ids"]
    if len(row["ids"]) != len(lengths):
        return "ids and seq_lens differ in length"
    if not (sum(lengths) == row["num_tokens"] == len(tokens) == len(row["labels"])):
        return "seq_lens, num_tokens, input_ids and labels disagree on the length"
    if row["position_ids"] != [p for n in lengths for p in range(n)]:
        return "position_ids do not restart at 0 for every thread"
    trained = [pair for pair in zip(row["labels"], tokens, strict=True) if pair[0] != IGNORE]
    if len(trained) != row["num_trained"] or any(label != token for label, token in trained):
        return "labels are not -100 or the token, or num_trained differs"
    return None


def _pack_config(manifest: dict[str, Any]) -> tuple[int, str] | None:
    """The seq_len and overlong policy of an `mms pack` output (None: a run's)."""
    config = manifest.get("config") or {}
    pack, overlong = config.get("pack"), config.get("overlong")
    if not isinstance(pack, dict) or not isinstance(pack.get("seq_len"), int):
        return None
    return pack["seq_len"], str(overlong)


def _check_counts(out: Path, manifest: dict[str, Any], threads: int, result: Verification) -> None:
    """The manifest's thread counts against the rows (threads packed) and the drop list
    (threads dropped), and in = packed + dropped."""
    counts = manifest.get("counts") or {}
    dropped = sum(dropped_threads(out).values())
    stated = sum((counts.get("threads_dropped") or {}).values())
    if counts.get("threads_packed") != threads:
        result.problems.append(
            Problem(
                "manifest.json",
                f"threads_packed is {counts.get('threads_packed')}, the rows hold {threads}",
            )
        )
    if stated != dropped:
        result.problems.append(
            Problem(DROPPED_FILE, f"lists {dropped} dropped threads, the manifest {stated}")
        )
    if counts.get("threads_in") != threads + dropped:
        result.problems.append(
            Problem(
                "manifest.json",
                f"threads_in is {counts.get('threads_in')}, not the {threads} packed "
                f"+ {dropped} dropped",
            )
        )
    result.count("packed threads counted", threads)


def _source_splits(
    out: Path, manifest: dict[str, Any], given: Path | None, result: Verification
) -> dict[str, list[Path]] | None:
    """The shards per split of the output `out` was packed from, when they are the files
    its manifest lists; None (a note, or a problem when the source was given) else."""
    inputs = [entry for entry in manifest.get("inputs") or [] if isinstance(entry, dict)]
    recorded = [PurePosixPath(str(entry.get("path"))) for entry in inputs]
    folder = given
    if folder is None and recorded and len(recorded[0].parts) > 2:
        folder = out.parent / recorded[0].parts[0]
    if folder is None or not (folder / "data").is_dir():
        result.notes.append(
            "packed threads not rendered again: the output they were packed from is not "
            f"beside {out.name} (name it with --source)"
        )
        return None
    present = {path.name: path for path in (folder / "data").glob("*.parquet")}
    wanted = {
        name.name: str(entry.get("sha256")) for name, entry in zip(recorded, inputs, strict=True)
    }
    same = set(present) == set(wanted) and all(
        file_sha256(present[name]) == digest for name, digest in wanted.items()
    )
    if not same:
        what = f"{folder} holds other shards than those packed (the manifest's inputs)"
        if given is not None:
            result.problems.append(Problem("--source", what))
        else:
            result.notes.append(f"packed threads not rendered again: {what}")
        return None
    return split_files(folder / "data")
