"""`mms verify`: check an output folder without trusting it. The files against the
manifest (every shard's sha256 and row count, nothing unlisted, the sha256 of every other
file it lists: tokenizer, reports, quarantine),
the dataset card's YAML against the files, and, unless asked not to, every row's
input_ids and labels rendered again from its messages with the shipped tokenizer, and
the shipped chat template against the stored rows (when transformers is installed)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow.parquet as pq
import yaml

from pipeline.media.check import content_address
from pipeline.mms import MEDIA_COLUMN, Thread, normalize_thread_dict
from pipeline.mms.media_columns import MEDIA_SHARD_COLUMNS, kind_columns
from pipeline.objectives.views import SftView, placed_media, sft_views
from pipeline.output.files import file_sha256
from pipeline.output.manifest import CARD_FILE
from pipeline.output.shards import split_files
from pipeline.output.tokenizer import SPECIAL_TOKENS_FILE, shipped_renderer
from pipeline.tokenize import IGNORE, TokenizerLoadError
from pipeline.tokenize.renderer import EncodedThread

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
) -> Verification:
    """Verify the output folder `out` (see the module docstring); `render` and `template`
    turn the row-by-row checks on; `hash_files` hashes the listed files, all in one call."""
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
        _check_packed(shards, result, _placeholders(out))
        result.notes.append(
            "packed rows: checked as packed (positions, lengths, labels, ids); their threads' "
            "messages are not in them, so they are not rendered again"
        )
        if tokenizer:
            _check_file(out, tokenizer["path"], tokenizer["sha256"], result, digests)
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
    their content address (`media/<sha256>.<ext>`) names."""
    kinds = {column: kind for kind, column in MEDIA_SHARD_COLUMNS.items()}
    ids = [i for name in TOKEN_COLUMNS if row.get(name) for i in row[name]]
    for column in kind_columns(row):
        cells = row[column] or ()
        wanted = sum(1 for i in ids if (placeholders or {}).get(i) == kinds[column])
        if len(cells) != wanted:
            return f"{column} holds {len(cells)} media for {wanted} placeholder(s)"
        for position, cell in enumerate(cells):
            named = content_address(cell.get("path"))
            data = cell.get("bytes")
            if (
                data is not None
                and named is not None
                and hashlib.sha256(data).hexdigest() != named[1]
            ):
                return f"{column}[{position}]'s bytes are not the media {cell['path']} names"
    return None


def _check_packed(
    shards: list[tuple[str, Path]], result: Verification, placeholders: dict[int, str] | None
) -> None:
    """Every packed row holds whole threads: lengths that add up, positions restarting at
    0 for each thread, labels that are -100 or the token, each thread id once per split,
    and one media per placeholder in its media columns."""
    seen: dict[str, set[str]] = {}
    for split, rows in _rows(shards):
        ids = seen.setdefault(split, set())
        for index, row in enumerate(rows):
            where = f"{split} packed row {index} ({', '.join(row['ids'][:2])} ...)"
            what = _packed_problem(row, ids) or _media_problem(row, placeholders)
            if what:
                result.problems.append(Problem(where, what))
            ids.update(row["ids"])
        result.count("packed rows checked", len(rows))


def _packed_problem(row: dict[str, Any], earlier: set[str]) -> str | None:
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
    again = earlier.intersection(row["ids"]) or len(set(row["ids"])) != len(row["ids"])
    return "a thread is packed twice" if again else None


def _check_template(out: Path, shards: list[tuple[str, Path]], result: Verification) -> None:
    """apply_chat_template of the shipped tokenizer on every row's stored messages, against
    its input_ids and labels (a row with media: its messages as stored, media as content
    parts, so every such row renders its placeholders exactly where its ids hold them); rows whose text spells an added token cannot match (the
    template's string is tokenized with special-token matching on) and are counted apart."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        result.notes.append("chat template not checked: transformers is not installed")
        return
    tokenizer = AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    if not tokenizer.chat_template:
        result.problems.append(Problem("tokenizer/", "tokenizer_config.json has no chat template"))
        return
    added = re.compile("|".join(map(re.escape, tokenizer.get_added_vocab())))
    placeholders = _placeholders(out)
    for split, rows in _rows(shards, placeholders):
        for view in (view for row in rows for view in _template_views(row, placeholders)):
            texts = [_text(m.get("content")) for m in view.messages] + [
                m.get("name") or "" for m in view.messages
            ]
            if any(added.search(text) for text in texts):
                result.count("rows spelling a special token (template not comparable)")
                continue
            what = _template_problem(tokenizer, view)
            if what:
                result.problems.append(
                    Problem(f"{split} row {view.name}", f"the chat template gives other {what}")
                )
            result.count("rows against the chat template")
            if any(
                part.get("type") != "text"
                for m in view.messages
                if isinstance(m.get("content"), list)
                for part in m["content"]
            ):
                result.count("rows with media against the chat template")


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
