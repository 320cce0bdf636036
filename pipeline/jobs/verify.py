"""`mms verify`: check an output folder without trusting it. The files against the
manifest (every shard's sha256 and row count, nothing unlisted, the sha256 of every other
file it lists: tokenizer, reports, quarantine),
the dataset card's YAML against the files, and, unless asked not to, every row's
input_ids and labels rendered again from its messages with the shipped tokenizer, and
the shipped chat template against the stored rows (when transformers is installed): every
kind of row, a packed output's threads on the rows they were packed from
(`check_packed_output`)."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow.parquet as pq
import yaml

from pipeline.media.check import content_address
from pipeline.mms import MEDIA_COLUMN, Thread, normalize_thread_dict
from pipeline.mms.media_columns import COLUMN_KINDS, FRAMES_COLUMN, kind_columns
from pipeline.objectives.views import SftView, placed_media, sft_views
from pipeline.output.files import file_sha256
from pipeline.output.manifest import CARD_FILE
from pipeline.output.shards import split_files
from pipeline.output.tokenizer import SPECIAL_TOKENS_FILE, shipped_renderer
from pipeline.quarantine import DROPPED_FILE
from pipeline.tokenize import IGNORE, TokenizerLoadError
from pipeline.tokenize.overlong import fit_batch
from pipeline.tokenize.renderer import EncodedThread, Renderer

if TYPE_CHECKING:
    import numpy as np

ROW_BATCH = 512
TOKEN_COLUMNS = ("input_ids", "prompt_ids", "chosen_ids", "rejected_ids", "completion_ids")
"""The token columns of a row of any kind, in the order its media columns follow them."""

HashFiles = Callable[[Sequence[Path]], Sequence[str]]
"""The sha256 hex digests of files, in their order (`mms run` hashes its output's files on
its engine's workers: their bytes grow with the data)."""


def hash_here(paths: Sequence[Path]) -> list[str]:
    """The files' sha256 digests, hashed one after the other in this process."""
    return [file_sha256(path) for path in paths]


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing that does not hold: where (a file, or `split` and row id) and what."""

    where: str
    what: str


@dataclass
class Verification:
    """What `verify_output` checked (counts per check) and every problem it found."""

    checked: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems

    def count(self, check: str, n: int = 1) -> None:
        self.checked[check] = self.checked.get(check, 0) + n


class OutputError(ValueError):
    """The folder is not an mms output at all (no readable manifest.json)."""


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
    if _lists_a_card(manifest) or (out / CARD_FILE).exists():
        _check_card(out, manifest, result)
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
            _check_rows(out, shards, result, progress)
        if template:
            _check_template(out, shards, result)
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
        _check_rows(out, shards, result, progress)
    if template:
        _check_template(out, shards, result)
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


def _lists_a_card(manifest: dict[str, Any]) -> bool:
    """Whether the manifest lists a dataset card (a run's or a pack's; `mms tokenize`
    writes none)."""
    return manifest.get("card") is not None


def _front_matter(card: Path) -> dict[str, Any] | None:
    text = card.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return None
    head = text[4 : text.find("\n---", 4)]
    loaded = yaml.safe_load(head)
    return loaded if isinstance(loaded, dict) else None


def _check_card(out: Path, manifest: dict[str, Any], result: Verification) -> None:
    """The card's configs name exactly the manifest's splits, each path glob matches that
    split's shards, and dataset_info.splits gives their row counts."""
    front = _card_front(out / "README.md", result)
    if front is None:
        return
    splits = manifest["splits"]
    result.problems.extend(_card_file_problems(out, front, splits))
    result.problems.extend(_card_row_problems(front, splits))
    result.count("card")


def _card_front(card: Path, result: Verification) -> dict[str, Any] | None:
    """The card's YAML front matter; None (a problem in `result`) when there is none."""
    if not card.is_file():
        result.problems.append(Problem("README.md", "no dataset card"))
        return None
    try:
        front = _front_matter(card)
    except yaml.YAMLError as err:
        result.problems.append(Problem("README.md", f"front matter is not YAML: {err}"))
        return None
    if front is None:
        result.problems.append(Problem("README.md", "no YAML front matter"))
    return front


def _card_file_problems(out: Path, front: dict[str, Any], splits: dict[str, Any]) -> list[Problem]:
    """Where the card's configs do not name the manifest's splits, or a split's path glob
    does not match exactly its shards."""
    problems: list[Problem] = []
    files = [f for config in front.get("configs") or [] for f in config.get("data_files") or []]
    declared = {f.get("split"): f.get("path") for f in files if isinstance(f, dict)}
    if set(declared) != set(splits):
        problems.append(
            Problem(
                "README.md",
                f"declares splits {sorted(map(str, declared))}, the files hold {sorted(splits)}",
            )
        )
    for split, pattern in declared.items():
        if split not in splits or not isinstance(pattern, str):
            continue
        matched = {f"data/{p.name}" for p in out.glob(pattern)}
        wanted = {shard["path"] for shard in splits[split]["shards"]}
        if matched != wanted:
            problems.append(
                Problem(
                    "README.md",
                    f"split {split}: {pattern} matches {sorted(matched)}, not {sorted(wanted)}",
                )
            )
    return problems


def _card_row_problems(front: dict[str, Any], splits: dict[str, Any]) -> list[Problem]:
    """Where the card's dataset_info.splits does not give a split's row count."""
    info = front.get("dataset_info") or {}
    examples = {s.get("name"): s.get("num_examples") for s in info.get("splits") or []}
    return [
        Problem(
            "README.md",
            f"split {split}: num_examples {examples.get(split)}, the shards hold {entry['rows']}",
        )
        for split, entry in splits.items()
        if examples.get(split) != entry["rows"]
    ]


def _rows(
    shards: list[tuple[str, Path]], placeholders: dict[int, str] | None = None
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Every shard's rows, batch by batch; with `placeholders` (id to media kind, of an
    output whose tokenizer ships them), a row of threads without a `media` column gets one
    from its ids (`_placed_media`)."""
    for split, path in shards:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=ROW_BATCH):
            rows = batch.to_pylist()
            if placeholders:
                rows = [_placed_media(row, placeholders) for row in rows]
            yield split, rows


def _placeholders(out: Path) -> dict[int, str] | None:
    """Each media placeholder id of the output's tokenizer and its kind (None: it ships
    none, a text-only output)."""
    try:
        record = orjson.loads((out / "tokenizer" / "mms_special_tokens.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    media = record.get("media_tokens") or {}
    return {entry["id"]: kind for kind, entry in media.items()} or None


def _placed_media(row: dict[str, Any], placeholders: dict[int, str]) -> dict[str, Any]:
    """A row of threads whose shard has no `media` column (an `mms tokenize` output written
    before shards carried media columns): its media rebuilt from its markers and its ids' placeholders
    (`placed_media`), so its messages render again; unchanged when there are none."""
    if MEDIA_COLUMN in row or "messages" not in row:
        return row
    media = placed_media(row["messages"], row["input_ids"], placeholders)
    return row if media is None else {**row, MEDIA_COLUMN: media}


def _thread(view: SftView) -> Thread:
    return Thread.from_dict(normalize_thread_dict({"id": view.name, "messages": view.messages}))


def _check_rows(
    out: Path,
    shards: list[tuple[str, Path]],
    result: Verification,
    progress: Callable[[str, int], None] | None,
) -> None:
    """Every row's input_ids, labels and counts rendered again from its messages (a row of
    another objective than sft: each thread it was cut from, `sft_views`)."""
    try:
        renderer = shipped_renderer(out / "tokenizer")
    except TokenizerLoadError as err:
        result.problems.append(Problem("tokenizer/", str(err)))
        return
    placeholders = _placeholders(out)
    for split, rows in _rows(shards, placeholders):
        views = [(row, view) for row in rows for view in sft_views(row, placeholders)]
        threads = [_thread(view) for _, view in views]
        encoded = renderer.encode_batch(threads)
        prompts: np.ndarray | list[int] = (
            renderer.prompt_lengths(threads, encoded) if threads else []
        )
        for index, (row, view) in enumerate(views):
            what = _render_problem(row, view, encoded[index], renderer.generation_prompt_ids)
            if not what and view.prompt_tokens not in (None, prompts[index]):
                what = "the prompt's end (prompt_ids)"
            if what:
                result.problems.append(
                    Problem(
                        f"{split} row {view.name}",
                        f"{what} differ from its messages rendered again",
                    )
                )
        for row in rows:
            what = _count_problem(row) or _media_problem(row, placeholders)
            if what:
                result.problems.append(Problem(f"{split} row {row['id']}", what))
        result.count("rows rendered again", len(rows))
        if progress is not None:
            progress("rendered again", result.checked["rows rendered again"])


def _render_problem(
    row: dict[str, Any], view: SftView, ours: EncodedThread, generation_prompt: list[int]
) -> str | None:
    """Which stored field of `view` its rendering contradicts, if one does."""
    ids = list(ours.input_ids) + (generation_prompt if view.generation_prompt else [])
    if ids != view.input_ids:
        return "input_ids"
    if view.labels is not None and list(ours.labels) != view.labels:
        return "labels"
    if "num_tokens" in row and row["num_tokens"] != len(ids):
        return "num_tokens"
    if "num_trained" in row and row["num_trained"] != ours.num_trained:
        return "num_trained"
    return None


def _count_problem(row: dict[str, Any]) -> str | None:
    """An objective row's `num_X_tokens` that is not the length of its `X_ids`."""
    for key, value in row.items():
        part = key.removeprefix("num_").removesuffix("_tokens")
        counted = key.startswith("num_") and key.endswith("_tokens") and f"{part}_ids" in row
        if counted and value != len(row[f"{part}_ids"]):
            return f"{key} is not the length of {part}_ids"
    return None


def _media_problem(row: dict[str, Any], placeholders: dict[int, str] | None) -> str | None:
    """A media column (`images` ...) of a row whose media are not one per placeholder of
    their kind in its token columns, in number, or whose embedded bytes are not the media
    their content address (`media/<sha256>.<ext>`) names; a video that is neither one
    file (`videos`) nor a frame list (`video_frames`), or both."""
    ids = [i for name in TOKEN_COLUMNS if row.get(name) for i in row[name]]
    for column in kind_columns(row):
        cells = row[column] or ()
        wanted = sum(1 for i in ids if (placeholders or {}).get(i) == COLUMN_KINDS[column])
        if len(cells) != wanted:
            return f"{column} holds {len(cells)} media for {wanted} placeholder(s)"
        for position, cell in enumerate(cells):
            frames = cell if column == FRAMES_COLUMN and isinstance(cell, list) else None
            for number, each in enumerate(frames if frames is not None else [cell]):
                if each is None:
                    continue
                where = f"{column}[{position}]" + (f"[{number}]" if frames is not None else "")
                if frames is not None and not isinstance(each, dict):
                    return f"{where} is not an image cell"
                named = content_address(each.get("path"))
                data = each.get("bytes")
                if (
                    data is not None
                    and named is not None
                    and hashlib.sha256(data).hexdigest() != named[1]
                ):
                    return f"{where}'s bytes are not the media {each['path']} names"
    videos, frames = row.get("videos"), row.get(FRAMES_COLUMN)
    if videos is not None and frames is not None:
        for position, (video, listed) in enumerate(zip(videos, frames, strict=False)):
            if (video is None) == (listed is None):
                held = "neither" if video is None else "both"
                return f"video {position + 1} is {held} a file (videos) and a frame list ({FRAMES_COLUMN})"
            if listed is not None and not listed:
                return f"{FRAMES_COLUMN}[{position}] holds no frame"
    return None


def _check_template(out: Path, shards: list[tuple[str, Path]], result: Verification) -> None:
    """apply_chat_template of the shipped tokenizer on every row's stored messages, against
    its input_ids and labels (a row with media: its messages as stored, media as content
    parts, so every such row renders its placeholders exactly where its ids hold them);
    rows whose text spells an added token are counted apart (`TemplateCheck`)."""
    check = TemplateCheck.load(out / "tokenizer", result)
    if check is None:
        return
    placeholders = _placeholders(out)
    for split, rows in _rows(shards, placeholders):
        for view in (view for row in rows for view in _template_views(row, placeholders)):
            check(split, view)


@dataclass
class TemplateCheck:
    """The shipped chat template of a tokenizer folder applied to views, each one's
    problem and counts added to `result`."""

    tokenizer: Any
    added: re.Pattern[str]
    result: Verification

    @classmethod
    def load(cls, folder: Path, result: Verification) -> TemplateCheck | None:
        """The check of the tokenizer in `folder`; None (a note or a problem in `result`)
        when transformers is not installed or the tokenizer has no chat template."""
        try:
            from transformers import AutoTokenizer
        except ImportError:
            result.notes.append("chat template not checked: transformers is not installed")
            return None
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        if not tokenizer.chat_template:
            result.problems.append(
                Problem("tokenizer/", "tokenizer_config.json has no chat template")
            )
            return None
        added = re.compile("|".join(map(re.escape, tokenizer.get_added_vocab())))
        return cls(tokenizer, added, result)

    def __call__(self, split: str, view: SftView) -> None:
        """The template on `view`'s messages against its ids and labels; a view whose text
        spells an added token cannot match (the template's string is tokenized with
        special-token matching on) and is counted apart."""
        texts = [_text(m.get("content")) for m in view.messages] + [
            m.get("name") or "" for m in view.messages
        ]
        if any(self.added.search(text) for text in texts):
            self.result.count("rows spelling a special token (template not comparable)")
            return
        what = _template_problem(self.tokenizer, view)
        if what:
            self.result.problems.append(
                Problem(f"{split} row {view.name}", f"the chat template gives other {what}")
            )
        self.result.count("rows against the chat template")
        if any(
            part.get("type") != "text"
            for m in view.messages
            if isinstance(m.get("content"), list)
            for part in m["content"]
        ):
            self.result.count("rows with media against the chat template")


def _template_views(row: dict[str, Any], placeholders: dict[int, str] | None) -> list[SftView]:
    """The views the chat template is applied to: a row whose messages hold their media as
    content parts (DESIGN §7) as it stores them, which is what a trainer reads; an older
    row (markers, and its media in the `media` column) with its media placed back."""
    stored = any(
        isinstance(message.get("content"), list)
        for name in ("messages", "prompt", "chosen", "rejected", "completion")
        for message in row.get(name) or ()
    )
    return sft_views(row, None if stored else placeholders, stored=stored)


def _text(content: Any) -> str:
    """A stored message's text: its content, or the text parts of its list of parts."""
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content if part.get("type") == "text")
    return content or ""


def _template_problem(tokenizer: Any, view: SftView) -> str | None:
    """Which of the view's ids or labels the shipped chat template renders otherwise."""
    if view.labels is None:  # a prompt: up to the generation prompt
        ids = tokenizer.apply_chat_template(
            view.messages, tokenize=True, return_dict=True, add_generation_prompt=True
        )["input_ids"]
        return "input_ids" if ids != view.input_ids else None
    rendered = tokenizer.apply_chat_template(
        view.messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = rendered["input_ids"], rendered["assistant_masks"]
    labels = [i if m else IGNORE for i, m in zip(ids, mask, strict=True)]
    if ids != view.input_ids:
        return "input_ids"
    return "labels" if labels != view.labels else None


# ---------------------------------------------------------------- packed outputs
# `mms verify` of a packed output (DESIGN §7). Every packed row is checked as packed:
# lengths that add up, positions restarting at 0 for every thread, labels that are -100 or
# the token, one media per placeholder, and (an `mms pack` output) the thread counts its
# manifest gives against its rows and its drop list.
#
# A packed sequence holds no messages, so its threads are checked on the rows the pack read:
# the output it was packed from (`--source`, else the folder its manifest's inputs name,
# beside the packed one), taken only when its shards are the very files the manifest lists
# (sha256). Those rows are rendered again (renderer and chat template) as any SFT row is,
# each one over `seq_len` is cut again as the pack's overlong policy cuts it (its kept
# messages through the chat template too), and every source row must be in the packed rows
# exactly once (its id, ids, labels and media, as one thread's slice of a sequence) or in
# the drop list with its code: records in = threads packed + dropped. Thread ids need not
# be unique (two files of one source may number their records alike), so threads are
# matched by what they hold, not by id.

Media = list[tuple[str, list[dict[str, Any]]]]
"""A thread's media cells per media column (`images` ...), in column order."""


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
    placeholders = _placeholders(out) or {}
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
        _check_rows(out, labelled, result, progress)
    if template:
        _check_template(out, labelled, result)
    try:
        renderer = shipped_renderer(out / "tokenizer")
    except TokenizerLoadError as err:
        result.problems.append(Problem("tokenizer/", str(err)))
        return
    check = TemplateCheck.load(out / "tokenizer", result) if template else None
    expected = _Expected(*packing, renderer, placeholders, check)
    for split, paths in splits.items():
        for path in paths:
            expected.read(split, path, result)
    _match(out, shards, expected, placeholders, result)


def _check_structure(
    shards: list[tuple[str, Path]], result: Verification, placeholders: dict[int, str]
) -> int:
    """Every packed row holds whole threads and one media per placeholder; the threads
    the rows hold, in all."""
    threads = 0
    for split, rows in _rows(shards):
        for index, row in enumerate(rows):
            where = f"{split} packed row {index} ({', '.join(row['ids'][:2])} ...)"
            what = _packed_problem(row) or _media_problem(row, placeholders)
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


def _dropped(out: Path) -> Counter[tuple[str, str, str]]:
    """The pack's drop list: (split, thread id, code) of every thread it left out."""
    path = out / DROPPED_FILE
    lines = path.read_bytes().splitlines() if path.is_file() else []
    entries = [orjson.loads(line) for line in lines if line.strip()]
    return Counter(
        (str(entry.get("split")), str(entry.get("id")), str(entry.get("code")))
        for entry in entries
        if entry.get("stage") == "pack"
    )


def _check_counts(out: Path, manifest: dict[str, Any], threads: int, result: Verification) -> None:
    """The manifest's thread counts against the rows (threads packed) and the drop list
    (threads dropped), and in = packed + dropped."""
    counts = manifest.get("counts") or {}
    dropped = sum(_dropped(out).values())
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


def _key(thread_id: str, ids: list[int], labels: list[int], media: Media) -> bytes:
    """What identifies a packed thread: its id, ids, labels and media cells."""
    digest = hashlib.sha256(orjson.dumps([thread_id, ids, labels]))
    for column, cells in media:
        digest.update(column.encode())
        for cell in cells:
            _add_cell(digest, cell)
    return digest.digest()


def _add_cell(digest: Any, cell: dict[str, Any] | list[Any] | None) -> None:
    """A media cell into `digest`: a `{bytes, path}` cell, a frame list (a `video_frames`
    entry: its frames in order) or null (a video whose frames are in `video_frames`)."""
    if cell is None:
        digest.update(b"null")
    elif isinstance(cell, list):
        digest.update(b"[%d" % len(cell))
        for frame in cell:
            _add_cell(digest, frame)
    else:
        digest.update(orjson.dumps(cell.get("path")))
        data = cell.get("bytes")
        digest.update(b"-" if data is None else hashlib.sha256(data).digest())


def _cut(media: Media, ids: list[int], placeholders: dict[int, str]) -> Media:
    """Each column's first cells, one per placeholder of its kind that `ids` hold."""
    kinds = COLUMN_KINDS
    return [
        (column, cells[: sum(1 for i in ids if placeholders.get(i) == kinds[column])])
        for column, cells in media
    ]


@dataclass
class _Expected:
    """The packed threads and the drops the source rows call for, under the pack's
    `seq_len` and overlong policy (a row over it cut again, `fit_batch`)."""

    seq_len: int
    overlong: str
    renderer: Renderer
    placeholders: dict[int, str]
    template: TemplateCheck | None
    threads: dict[str, Counter[bytes]] = field(default_factory=dict)
    names: dict[bytes, str] = field(default_factory=dict)
    drops: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def read(self, split: str, path: Path, result: Verification) -> None:
        """The rows of one source shard of `split`."""
        wanted = self.threads.setdefault(split, Counter())
        for batch in pq.ParquetFile(path).iter_batches(batch_size=ROW_BATCH):
            long: list[dict[str, Any]] = []
            for row in batch.to_pylist():
                if row["num_tokens"] > self.seq_len:
                    long.append(row)
                    continue
                media = [(column, row[column] or []) for column in kind_columns(row)]
                self._want(wanted, row["id"], row["input_ids"], row["labels"], media)
            if long:
                self._overlong(split, long, wanted, result)

    def _want(
        self, wanted: Counter[bytes], name: str, ids: list[int], labels: list[int], media: Media
    ) -> None:
        key = _key(name, ids, labels, media)
        wanted[key] += 1
        self.names[key] = name

    def _overlong(
        self,
        split: str,
        rows: list[dict[str, Any]],
        wanted: Counter[bytes],
        result: Verification,
    ) -> None:
        """Source rows over seq_len: dropped, or cut at a message boundary and rendered
        again, their kept messages through the chat template (truncate)."""
        if self.overlong == "drop":
            self.drops.update((split, row["id"], "overlong") for row in rows)
            return
        if self.overlong != "truncate":
            for row in rows:
                result.problems.append(
                    Problem(
                        f"source {split} row {row['id']}",
                        f"{row['num_tokens']} tokens, over seq_len {self.seq_len}, which "
                        f"--overlong {self.overlong} packs in no way",
                    )
                )
            return
        placed = [_placed_media(row, self.placeholders) for row in rows]
        views = [sft_views(row, self.placeholders or None)[0] for row in placed]
        threads = [_thread(view) for view in views]
        encoded = self.renderer.encode_batch(threads)
        fit = fit_batch(threads, encoded, self.renderer, max_tokens=self.seq_len, policy="truncate")
        self.drops.update((split, drop.thread.id, drop.code) for drop in fit.drops)
        if fit.truncated_encoded is None:
            return
        for index, (thread, at) in enumerate(zip(fit.truncated, fit.truncated_rows, strict=True)):
            row, cut = rows[at], fit.truncated_encoded[index]
            ids, labels = list(cut.input_ids), list(cut.labels)
            media = _cut([(c, row[c] or []) for c in kind_columns(row)], ids, self.placeholders)
            self._want(wanted, thread.id, ids, labels, media)
            if self.template is not None:
                kept = row["messages"][: len(thread.messages)]  # as stored: what a trainer reads
                self.template(f"source {split}", SftView(f"{thread.id} (cut)", kept, ids, labels))


def _slices(row: dict[str, Any], placeholders: dict[int, str]) -> Iterator[tuple[str, bytes]]:
    """Each thread of a packed row: its id and its key (`_key`), its slice of the row's
    tokens and of its media cells."""
    kinds = COLUMN_KINDS
    columns = kind_columns(row)
    taken = dict.fromkeys(columns, 0)
    start = 0
    for name, length in zip(row["ids"], row["seq_lens"], strict=False):
        ids = row["input_ids"][start : start + length]
        labels = row["labels"][start : start + length]
        media: Media = []
        for column in columns:
            count = sum(1 for i in ids if placeholders.get(i) == kinds[column])
            media.append((column, (row[column] or [])[taken[column] : taken[column] + count]))
            taken[column] += count
        start += length
        yield name, _key(name, ids, labels, media)


def _match(
    out: Path,
    shards: list[tuple[str, Path]],
    expected: _Expected,
    placeholders: dict[int, str],
    result: Verification,
) -> None:
    """Every source row's thread in the packed rows exactly once, or dropped with the
    code its policy gives; nothing else in them."""
    found: dict[str, Counter[bytes]] = {}
    names: dict[bytes, str] = {}
    for split, rows in _rows(shards):
        held = found.setdefault(split, Counter())
        for row in rows:
            for name, key in _slices(row, placeholders):
                held[key] += 1
                names[key] = name
    matched = 0
    for split in dict.fromkeys([*expected.threads, *found]):
        wanted, held = expected.threads.get(split, Counter()), found.get(split, Counter())
        matched += sum((wanted & held).values())
        for key, count in sorted((held - wanted).items(), key=lambda item: names[item[0]]):
            result.problems.append(
                Problem(
                    f"{split} thread {names[key]}",
                    f"{count} packed slice(s) that are no source row's tokens, labels and "
                    "media (altered, or packed twice)",
                )
            )
        for key, count in sorted((wanted - held).items(), key=lambda item: expected.names[item[0]]):
            result.problems.append(
                Problem(
                    f"source {split} row {expected.names[key]}",
                    f"its thread is missing from the packed rows ({count}x) and not dropped",
                )
            )
    listed = _dropped(out)
    for (split, name, code), count in sorted((expected.drops - listed).items()):
        result.problems.append(
            Problem(f"source {split} row {name}", f"dropped ({code}) but not listed {count}x")
        )
    for (split, name, code), count in sorted((listed - expected.drops).items()):
        result.problems.append(
            Problem(DROPPED_FILE, f"lists {split} thread {name} as {code} {count}x too many")
        )
    result.count("packed threads matched to their source rows", matched)
