"""`verify_output`, what `mms verify` runs: the files of an output folder against its
manifest (every shard's sha256 and row count, nothing unlisted, the sha256 of every other
file it lists: tokenizer, reports, quarantine), then the card (card.py), the rows rendered
again (rows.py), the chat template (template.py), or a packed output's checks
(packed.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq

from pipeline.jobs.verify.base import HashFiles, OutputError, Problem, Verification, hash_here
from pipeline.jobs.verify.card import check_card, lists_a_card
from pipeline.jobs.verify.packed import check_packed_output
from pipeline.jobs.verify.rows import check_rows
from pipeline.jobs.verify.template import check_template
from pipeline.output.files import file_sha256
from pipeline.output.manifest import CARD_FILE
from pipeline.output.shards import split_files
from pipeline.output.tokenizer import SPECIAL_TOKENS_FILE


def verify_output(
    out: str | Path,
    *,
    render: bool = True,
    template: bool = True,
    progress: Callable[[str, int], None] | None = None,
    hash_files: HashFiles = hash_here,
    source: str | Path | None = None,
) -> Verification:
    """Verify the output folder `out` (see the module docstring); `render` and `template`
    turn the row-by-row checks on; `hash_files` hashes the listed files, all in one call;
    `source`: the output an `mms pack` output was packed from (else looked for beside
    it, `check_packed_output`)."""
    out = Path(out)
    result = Verification()
    if not (out / "manifest.json").exists() and (out / "tokenizer" / SPECIAL_TOKENS_FILE).is_file():
        return _verify_unlisted(out, result, render=render, template=template, progress=progress)
    manifest = _manifest(out)
    gate = manifest.get("gate") or {}
    if gate.get("passed") is False:
        result.problems.append(
            Problem("manifest.json", "the lint gate failed: this output publishes no dataset")
        )
        return result
    digests = _listed_digests(out, manifest, hash_files)
    shards = _check_shards(out, manifest, result, digests)
    if lists_a_card(manifest) or (out / CARD_FILE).exists():
        check_card(out, manifest, result)
    else:
        result.notes.append("no dataset card (an `mms tokenize` output): the card not checked")
    tokenizer = manifest.get("tokenizer")
    for entry in manifest.get("files", []):
        if not tokenizer or entry["path"] != tokenizer["path"]:  # that one is checked below
            _check_file(out, entry["path"], entry["sha256"], result, digests)
    if shards and "position_ids" in pq.read_schema(shards[0][1]).names:
        if tokenizer:
            _check_file(out, tokenizer["path"], tokenizer["sha256"], result, digests)
        check_packed_output(
            out,
            manifest,
            shards,
            result,
            source=None if source is None else Path(source),
            render=render,
            template=template,
            progress=progress,
        )
        return result
    if tokenizer:
        _check_file(out, tokenizer["path"], tokenizer["sha256"], result, digests)
        if render:
            check_rows(out, shards, result, progress)
        if template:
            check_template(out, shards, result)
    return result


def _verify_unlisted(
    out: Path,
    result: Verification,
    *,
    render: bool,
    template: bool,
    progress: Callable[[str, int], None] | None,
) -> Verification:
    """An output with no manifest (`mms tokenize` writes none): its rows rendered again
    and against the chat template; nothing lists the shards to check them against."""
    result.notes.append(
        "no manifest.json (an `mms tokenize` output): shard hashes, row counts and the card "
        "not checked"
    )
    shards = [(split, path) for split, paths in split_files(out / "data").items() for path in paths]
    if not shards:
        result.problems.append(Problem("data/", "no shards"))
        return result
    if render:
        check_rows(out, shards, result, progress)
    if template:
        check_template(out, shards, result)
    return result


def _manifest(out: Path) -> dict[str, Any]:
    path = out / "manifest.json"
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise OutputError(f"{out} has no manifest.json: not an mms output folder") from None
    except orjson.JSONDecodeError as err:
        raise OutputError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("splits"), dict):
        raise OutputError(f"{path} is not an mms manifest (no `splits`)")
    return data


def _listed_digests(out: Path, manifest: dict[str, Any], hash_files: HashFiles) -> dict[str, str]:
    """The sha256 of every file the manifest lists and the folder has (by its path
    relative to the output), hashed in one `hash_files` call."""
    listed = [
        shard["path"] for entry in manifest["splits"].values() for shard in entry.get("shards", [])
    ]
    listed += [entry["path"] for entry in manifest.get("files", [])]
    if manifest.get("tokenizer"):
        listed.append(manifest["tokenizer"]["path"])
    present = [path for path in dict.fromkeys(listed) if (out / path).is_file()]
    return dict(zip(present, hash_files([out / path for path in present]), strict=True))


def _check_file(
    out: Path, relative: str, sha256: str, result: Verification, digests: dict[str, str]
) -> bool:
    path = out / relative
    if not path.is_file():
        result.problems.append(Problem(relative, "listed in the manifest but missing"))
        return False
    digest = digests.get(relative)
    if (digest if digest is not None else file_sha256(path)) != sha256:
        result.problems.append(Problem(relative, "sha256 differs from the manifest's"))
        return False
    result.count("files")
    return True


def _check_shards(
    out: Path, manifest: dict[str, Any], result: Verification, digests: dict[str, str]
) -> list[tuple[str, Path]]:
    """Every listed shard present, with its sha256 and row count; no unlisted shard. The
    shards that can be read are returned, a changed one too, so its rows are checked and
    the problem is named by row."""
    good: list[tuple[str, Path]] = []
    listed = set()
    for split, entry in manifest["splits"].items():
        for shard in entry.get("shards", []):
            listed.add(shard["path"])
            _check_file(out, shard["path"], shard["sha256"], result, digests)
            if not (out / shard["path"]).is_file():
                continue
            try:
                rows = pq.ParquetFile(out / shard["path"]).metadata.num_rows
            except Exception as err:  # pyarrow raises several types for a broken file
                result.problems.append(
                    Problem(shard["path"], f"not a readable Parquet file: {err}")
                )
                continue
            if rows != shard["rows"]:
                result.problems.append(
                    Problem(shard["path"], f"{rows} rows, the manifest says {shard['rows']}")
                )
                continue
            result.count("rows", rows)
            good.append((split, out / shard["path"]))
        if not entry.get("shards"):
            result.problems.append(Problem(f"split {split}", "declared with no shard"))
    data = out / "data"
    for path in sorted(data.glob("*")) if data.is_dir() else []:
        relative = f"data/{path.name}"
        if relative not in listed:
            result.problems.append(Problem(relative, "not listed in the manifest"))
    return good
