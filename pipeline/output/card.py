"""`README.md` of a pipeline run (DESIGN §7): a Hugging Face dataset card whose YAML front
matter declares the license, tags, `configs` (the data files of each split) and the
features, and whose body gives the stats, the lint summary and how to load the data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any, NotRequired, TypedDict

import pyarrow as pa
import yaml

from pipeline.accounting import most_first
from pipeline.lint.report import LintReport
from pipeline.lint.rules import RULES_BY_CODE
from pipeline.objectives import objective_of
from pipeline.output.card_features import hf_features
from pipeline.output.card_training import TrainingFacts, python_literal, training_section
from pipeline.output.shards import SHARD_FILE
from pipeline.sources.paths import HF_PREFIX
from pipeline.tokenize.renderer import IGNORE
from pipeline.version import __version__
from pipeline.wording import plural

SPEC = "Modular Model Spec v0.0.0"
_SIZES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
    (1_000_000_000, "100M<n<1B"),
    (10_000_000_000, "1B<n<10B"),
    (100_000_000_000, "10B<n<100B"),
    (1_000_000_000_000, "100B<n<1T"),
)
"""The Hub's size categories below a trillion rows: (bound, category)."""
_COLUMNS = {
    "id": "thread id, unique in the dataset",
    "messages": "the thread's messages: role, content, format, end_turn, name, weight",
    "settings": "system settings: the formats the thread allows (null when it sets none)",
    "meta": "JSON object: source file, record locator, input format and source metadata",
    "input_ids": "the thread rendered with the MMS special tokens",
    "labels": f"`input_ids` where the assistant is trained, {IGNORE} elsewhere",
    "num_tokens": "length of `input_ids`",
    "num_trained": f"tokens whose label is not {IGNORE} (0: nothing to train on)",
    "position_ids": "each token's position in its own thread (0 where a thread starts)",
    "seq_lens": "the lengths of the threads packed in the row, in order",
    "ids": "the ids of the threads packed in the row, in order",
    "prompt": "the prompt's messages: everything before the final assistant turn",
    "chosen": "the chosen side's final assistant turn (messages)",
    "rejected": "the rejected side's final assistant turn (messages)",
    "completion": "the labelled completion: the final assistant turn (messages)",
    "prompt_ids": "the prompt rendered, ending with the generation prompt",
    "chosen_ids": "the chosen completion's tokens: prompt_ids + chosen_ids is its thread",
    "rejected_ids": "the rejected completion's tokens: prompt_ids + rejected_ids is its thread",
    "completion_ids": "the completion's tokens: prompt_ids + completion_ids is its thread",
    "chosen_labels": f"`chosen_ids` where trained, {IGNORE} elsewhere",
    "rejected_labels": f"`rejected_ids` where trained, {IGNORE} elsewhere",
    "completion_labels": f"`completion_ids` where trained, {IGNORE} elsewhere",
    "label": "whether the completion is desirable (KTO)",
    "reference": "what a reward function checks a generation against (text or JSON)",
    "num_prompt_tokens": "length of `prompt_ids`",
    "num_chosen_tokens": "length of `chosen_ids`",
    "num_rejected_tokens": "length of `rejected_ids`",
    "num_completion_tokens": "length of `completion_ids`",
    "media": "each media of the thread: its message, kind, source and mime, in order",
    "images": "the row's images in placeholder order: `{bytes, path}` (datasets' Image)",
    "audios": "the row's audio in placeholder order: `{bytes, path}` (datasets' Audio)",
    "videos": "the row's videos in placeholder order: `{bytes, path}` (datasets' Video); "
    "null for a video given as frames",
    "video_frames": "beside `videos`, each video given as frames: its frames in order "
    "(datasets' Image cells); null for a video that is one file",
}
_OBJECTIVE_ROWS = {
    "preference": "one row per preference pair, its prompt once",
    "unpaired_preference": "one row per labelled completion",
    "prompt": "one row per prompt, rendered up to the generation prompt",
}


class LintRow(TypedDict):
    """One row of the lint summary: a rule's code, severity, findings and summary."""

    code: str
    severity: str
    findings: int
    summary: str


class SourceRow(TypedDict):
    """One input of the card's sources table: where it came from, its license, and what
    became of its records."""

    path: str
    license: str | None
    records_read: int
    quarantined: int
    written: int
    tokens: int | None
    main_loss: NotRequired[str | None]
    """For an input that gave no row: what cost it the most (`27 quarantined as ...`)."""


class TokenFigures(TypedDict):
    """A split's tokens: in all, trained, and the lengths of its rows in percentiles."""

    tokens: int
    trained: int
    p50: int
    p90: int
    p99: int
    max: int


class CardStats(TypedDict):
    """The figures the card shows, gathered by the run."""

    threads: int
    rows: dict[str, int]
    """Rows per split."""
    bytes: dict[str, int]
    """Parquet bytes per split (the Hub's `num_bytes`)."""
    renderer: str | None
    """The tokenizer renderer (`mms-v0`), None when the job did not tokenize."""
    tokens: int | None
    trained_tokens: int | None
    training: TrainingFacts | None
    """What a trainer must know, None when the job did not tokenize."""
    packing: dict[str, Any] | None
    """How rows were packed (seq_len, sequences, fill ...), None for unpacked rows."""
    formats: dict[str, int]
    """Assistant messages per response format."""
    capabilities: dict[str, dict[str, int]]
    """Per capability: {"enabled": threads enabling it, "used": threads using it}."""
    lint: list[LintRow] | None
    """The lint summary, None when the job ran no lint stage."""
    sources: NotRequired[list[SourceRow]]
    """Per input: its license and counts (a run's card)."""
    quarantined: NotRequired[int]
    """Records quarantined (a run's card: none, no quarantine file)."""
    split_tokens: NotRequired[dict[str, TokenFigures]]
    """Per split: tokens, trained tokens and row lengths (a tokenized, unpacked output)."""
    gate: NotRequired[str]
    """The lint gate's `fail_on` level the published threads passed."""
    losses: NotRequired[Losses]
    """What the run removed or cut (a run's card)."""
    reports: NotRequired[list[str]]
    """The report files with the full figures, relative to the output (a run's card)."""


class Losses(TypedDict):
    """Threads a run removed as duplicates, and what truncation cut to fit max_tokens."""

    exact_duplicates: int
    near_duplicates: int
    truncated: int
    tokens_truncated: int
    groups_kept: NotRequired[dict[str, int]]
    """Preference pairs (`pair`) and other groups (`group`) kept whole, by kind."""
    groups_dropped: NotRequired[dict[str, int]]
    """The same, left out whole (a stage never leaves a member of one alone)."""
    tagged: NotRequired[dict[str, int]]
    """What the curation stages found, tagged or rewrote (`stage:what`: count)."""


def lint_summary(report: LintReport) -> list[LintRow]:
    """The card's lint rows for `report`, by code."""
    return [
        LintRow(
            code=code,
            severity=report.severity_of(code),
            findings=report.by_code[code],
            summary=RULES_BY_CODE[code].summary,
        )
        for code in sorted(report.by_code)
    ]


MIXED_LICENSE = "mixed"
TASKS = {"task_categories": ["text-generation"], "task_ids": ["dialogue-modeling"]}
"""What MMS threads are for, in the Hub's task taxonomy."""


def license_fields(licenses: Sequence[str | None]) -> dict[str, Any]:
    """The card's license for inputs under `licenses` (None: the input names none): the
    license all of them share; `unknown` when none names one; otherwise `other`, named
    `mixed` (the card's sources table gives each input's)."""
    named = sorted({license for license in licenses if license})
    if not named:
        return {"license": "unknown"}
    if len(named) == 1 and all(licenses):
        return {"license": named[0]}
    return {"license": "other", "license_name": MIXED_LICENSE}


def source_datasets(paths: Sequence[str]) -> list[str]:
    """The card's `source_datasets`: the Hub datasets read (`hf:ORG/NAME`), and `original`
    when local files (or local `hf:./dir` datasets) were read too."""
    hub: set[str] = set()
    local = False
    for path in paths:
        name = path.removeprefix(HF_PREFIX)
        if name != path and not name.startswith(("./", "../", "/")):
            hub.add(name)
        else:
            local = True
    return sorted(hub) + (["original"] if local else [])


def size_category(rows: int) -> str:
    """The Hub's `size_categories` value for a dataset of `rows` rows."""
    for bound, category in _SIZES:
        if rows < bound:
            return category
    return "n>1T"


def dataset_card(
    *,
    name: str,
    description: str,
    license: Mapping[str, Any],
    sources: Sequence[str] = (),
    languages: Sequence[str] = (),
    tags: Sequence[str],
    splits: Mapping[str, Sequence[str]],
    features: pa.Schema,
    stats: CardStats,
    how_to_load: str,
) -> str:
    """The dataset card text. `license` is `license_fields`' answer; `sources` the inputs
    read (paths or `hf:` ids, for `source_datasets`); `languages` the ones the inputs
    name (ISO 639 codes; none: the card names none); `splits` maps each split to its data
    files relative to the output directory (`data/train-00000-of-00002.parquet`);
    `how_to_load` is what to pass to `datasets.load_dataset` (a Hub repo id or the output
    directory, given as `local_dataset_path` names it)."""
    if set(splits) != set(stats["rows"]):
        raise ValueError(
            f"the card's splits {sorted(splits)} differ from the split rows counted "
            f"{sorted(stats['rows'])}"
        )
    front = {
        "pretty_name": name,
        **license,
        **TASKS,
        **({"source_datasets": source_datasets(sources)} if sources else {}),
        **({"language": list(languages)} if languages else {}),
        "tags": list(tags),
        "size_categories": [size_category(stats["threads"])],
        "configs": [
            {
                "config_name": "default",
                "data_files": [
                    {"split": split, "path": _split_glob(split, files)}
                    for split, files in splits.items()
                ],
            }
        ],
        "dataset_info": {
            "features": hf_features(features),
            "splits": [
                {
                    "name": split,
                    "num_bytes": stats["bytes"][split],
                    "num_examples": stats["rows"][split],
                }
                for split in splits
            ],
        },
    }
    front_text = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
    sections = [
        f"# {name}",
        description.strip(),
        _about(features, stats),
        _columns(features),
        _stats(splits, stats),
        _split_tokens(stats.get("split_tokens")),
        _sources(stats.get("sources")),
        _packing(stats["packing"]) if stats["packing"] else _formats(stats),
        _lint(stats["lint"], stats.get("gate")),
        _how_to_load(how_to_load, splits),
        training_section(how_to_load, next(iter(splits)), stats["training"]),
    ]
    body = "\n\n".join(section for section in sections if section)
    return f"---\n{front_text}---\n\n{body}\n"


def local_dataset_path(folder: str) -> str:
    """How a card or a hint names the local output `folder` to a loader: `./NAME` for a
    bare relative name, so that `load_dataset` and `from_pretrained`, run where no such
    folder exists, fail instead of resolving a Hub repository or a cached dataset of that
    name."""
    if folder.startswith(("/", "./", "../")) or PurePosixPath(folder).is_absolute():
        return folder
    return f"./{folder}"


def card_for_repository(text: str, folder: str, repo_id: str) -> str:
    """The card of the output folder named `folder` as published in the Hub repository
    `repo_id`: its code loads the data, and the tokenizer and its generation config (its
    `tokenizer` subfolder), from the repository. A card written for `repo_id` already is
    returned unchanged."""
    folder = local_dataset_path(folder)
    for loader in ("AutoTokenizer", "GenerationConfig"):
        local = f"{loader}.from_pretrained({python_literal(folder + '/tokenizer')})"
        on_hub = f'{loader}.from_pretrained({python_literal(repo_id)}, subfolder="tokenizer")'
        text = text.replace(local, on_hub)
    return text.replace(
        f"load_dataset({python_literal(folder)}", f"load_dataset({python_literal(repo_id)}"
    )


# ---------------------------------------------------------------- front matter


def _split_glob(split: str, files: Sequence[str]) -> str:
    """`data/train-*.parquet`, after checking that it names exactly `files`."""
    if not files:
        raise ValueError(f"split {split!r} has no data files")
    folders = {PurePosixPath(file).parent for file in files}
    for file in files:
        match = SHARD_FILE.match(PurePosixPath(file).name)
        if match is None or match["split"] != split:
            raise ValueError(f"{file} is not a shard of split {split!r} ({split}-NNNNN-of-NNNNN)")
    if len(folders) != 1:
        raise ValueError(f"the shards of split {split!r} are in several folders: {sorted(files)}")
    return str(folders.pop() / f"{split}-*.parquet")


# ---------------------------------------------------------------- body


def _about(features: pa.Schema, stats: CardStats) -> str:
    text = (
        f"Conversation threads in the {SPEC} (MMS) format, one thread per row, written by "
        f"mms-pipeline {__version__}. `manifest.json` lists the inputs with their "
        "sha256, the resolved pipeline config, the versions used and every shard's sha256"
    )
    text += (
        "; `quarantine/rejected.jsonl` holds every input record that did not become a thread, "
        "with the reason."
        if stats.get("quarantined", 1)
        else "; every input record became a thread (nothing was quarantined)."
    )
    if stats["renderer"] is not None and "prompt_ids" in features.names:
        objective = objective_of(features.names)
        text += (
            f"\n\nTokenized with the `{stats['renderer']}` renderer, {_OBJECTIVE_ROWS[objective]} "
            f"(objective `{objective}`): each thread's tokens are cut where its final "
            "assistant turn begins, so `prompt_ids` followed by a completion's ids is exactly "
            "that thread rendered, and the completion's labels mark what is trained."
        )
    elif stats["renderer"] is not None and "input_ids" in features.names:
        text += (
            f"\n\nTokenized with the `{stats['renderer']}` renderer: `input_ids` is the thread "
            "rendered with the MMS special tokens and `labels` marks exactly the tokens the "
            f"assistant is trained on ({IGNORE} elsewhere). The tokenizer with the special "
            "tokens added is `tokenizer/tokenizer.json`."
        )
    return text


def _columns(features: pa.Schema) -> str:
    rows = [(f"`{f.name}`", f"`{f.type}`", _COLUMNS.get(f.name, "")) for f in features]
    return "## Columns\n\n" + _table(("column", "Arrow type", "meaning"), rows, right=())


def _stats(splits: Mapping[str, Sequence[str]], stats: CardStats) -> str:
    rows = [("threads", _count(stats["threads"]))]
    if stats["tokens"] is not None:
        rows.append(("tokens", _count(stats["tokens"])))
    if stats["trained_tokens"] is not None:
        rows.append(("trained tokens", _count(stats["trained_tokens"])))
    if stats["tokens"] and stats["trained_tokens"] is not None:
        rows.append(("trained share", f"{stats['trained_tokens'] / stats['tokens']:.1%}"))
    losses = stats.get("losses")
    if losses is not None:
        rows += [
            ("exact duplicates removed", _count(losses["exact_duplicates"])),
            ("near duplicates removed", _count(losses["near_duplicates"])),
            (
                "threads truncated to fit",
                f"{_count(losses['truncated'])} ({_count(losses['tokens_truncated'])} tokens cut)",
            ),
        ]
        by_stage: dict[str, list[str]] = {}
        for key, count in sorted(losses.get("tagged", {}).items()):
            stage, _, what = key.partition(":")
            by_stage.setdefault(stage, []).append(f"{what} {_count(count)}")
        rows += [(f"curation: {stage}", ", ".join(found)) for stage, found in by_stage.items()]
        kept, dropped = losses.get("groups_kept", {}), losses.get("groups_dropped", {})
        for kind, noun in (("pair", "preference pairs"), ("group", "thread groups")):
            if kept.get(kind) or dropped.get(kind):
                rows.append(
                    (
                        f"{noun} (kept or left out whole)",
                        f"{_count(kept.get(kind, 0))} kept, {_count(dropped.get(kind, 0))} left out",
                    )
                )
    rows += [
        (f"split `{split}`", f"{_count(stats['rows'][split])} rows in {plural(len(files), 'file')}")
        for split, files in splits.items()
    ]
    text = "## Statistics\n\n" + _table(("", "value"), rows, right=(1,))
    reports = stats.get("reports")
    if reports:
        named = ", ".join(f"[`{path}`]({path})" for path in reports)
        text += (
            f"\n\nEvery figure (tokens per role, length histograms, capabilities, drops per "
            f"reason with their tokens, per input): {named}."
        )
    return text


def _split_tokens(figures: Mapping[str, TokenFigures] | None) -> str:
    if not figures:
        return ""
    rows = [
        (
            f"`{split}`",
            _count(f["tokens"]),
            _count(f["trained"]),
            f"{f['trained'] / f['tokens']:.1%}" if f["tokens"] else "-",
            f"{f['p50']:,} / {f['p90']:,} / {f['p99']:,} / {f['max']:,}",
        )
        for split, f in figures.items()
    ]
    headers = ("split", "tokens", "trained tokens", "trained", "row tokens p50 / p90 / p99 / max")
    return "## Tokens\n\n" + _table(headers, rows, right=(1, 2, 3, 4))


def _sources(sources: Sequence[SourceRow] | None) -> str:
    if not sources:
        return ""
    rows = [
        (
            f"`{source['path']}`",
            source["license"] or "not given",
            _count(source["records_read"]),
            _count(source["quarantined"]),
            _count(source["written"]),
            _count(source["tokens"]) if source["tokens"] is not None else "-",
        )
        for source in sources
    ]
    headers = ("source", "license", "records read", "quarantined", "rows written", "tokens")
    note = (
        "\n\nRows written count the copies a source's mixing weight adds; the license of "
        "this dataset is each source's, as listed."
    )
    empty = [
        f"\n\n> **`{source['path']}` gave no row** ({_count(source['records_read'])} records "
        f"read): mostly {source.get('main_loss') or 'nothing read from it'}."
        for source in sources
        if not source["written"]
    ]
    return "## Sources\n\n" + _table(headers, rows, right=(2, 3, 4, 5)) + note + "".join(empty)


def _formats(stats: CardStats) -> str:
    parts = ["## Formats and capabilities"]
    if stats["formats"]:
        rows = [(f"`{name}`", _count(n)) for name, n in most_first(stats["formats"])]
        parts.append(_table(("response format", "assistant messages"), rows, right=(1,)))
    else:
        parts.append("No assistant messages were profiled.")
    capabilities = stats["capabilities"]
    if capabilities:
        ordered = sorted(capabilities, key=lambda name: (-capabilities[name].get("used", 0), name))
        uses = [
            (
                f"`{name}`",
                _count(capabilities[name].get("enabled", 0)),
                _count(capabilities[name].get("used", 0)),
            )
            for name in ordered
        ]
        headers = ("capability", "threads enabling it", "threads using it")
        parts.append(_table(headers, uses, right=(1, 2)))
    else:
        parts.append("No thread enables or uses a capability beyond the default format.")
    return "\n\n".join(parts)


def _lint(rows: list[LintRow] | None, gate: str | None = None) -> str:
    if rows is None:
        return "## Lint\n\nThis job ran no lint stage."
    verdict = ""
    if gate is not None:
        verdict = (
            "The lint gate is off (`fail_on: never`): findings are reported, not gated.\n\n"
            if gate == "never"
            else f"The threads published passed the lint gate (`fail_on: {gate}`).\n\n"
        )
    if not rows:
        return f"## Lint\n\n{verdict}The lint stage found nothing."
    cells = [
        (f"`{row['code']}`", row["severity"], _count(row["findings"]), row["summary"])
        for row in rows
    ]
    table = _table(("code", "severity", "findings", "rule"), cells, right=(2,))
    return (
        "## Lint\n\n"
        + verdict
        + table
        + "\n\nThe full report: `reports/lint.md`, `reports/lint.html`."
    )


def _packing(facts: Mapping[str, Any]) -> str:
    """What a packed row is, how full they are, and how attention keeps threads apart."""
    rows = [
        ("most tokens in a row", _count(facts["seq_len"])),
        ("packed rows", _count(facts["sequences"])),
        ("threads", _count(facts["threads"])),
        ("threads per row", f"{facts['threads_per_sequence']:.2f}"),
        ("fill (tokens / rows x most)", f"{facts['fill']:.2%}"),
        ("padding at full length", _count(facts["padding"])),
    ]
    return (
        "## Packing\n\nEach row is several threads packed best-fit-decreasing: their "
        "`input_ids` and `labels` concatenated unchanged, `position_ids` restarting at 0 for "
        "each thread, `seq_lens` their lengths. Give the model `position_ids` (and the "
        "flash-attention `cu_seq_lens_q/k` from `seq_lens`), or a block-diagonal mask, and "
        "no `past_key_values` cache (`use_cache=False`): then no thread attends to another.\n\n"
        + _table(("", "value"), rows, right=(1,))
    )


def _how_to_load(target: str, splits: Mapping[str, Sequence[str]]) -> str:
    split = next(iter(splits))
    pattern = _split_glob(split, splits[split])
    return f"""## How to load

With 🤗 Datasets:

```python
from datasets import load_dataset

dataset = load_dataset({python_literal(target)})
print(dataset[{python_literal(split)}][0]["messages"])
```

With pyarrow or pandas, from a copy of this folder:

```python
import glob

import pyarrow.parquet as pq

table = pq.ParquetDataset(sorted(glob.glob({python_literal(pattern)}))).read()
frame = table.to_pandas()
```"""


# ---------------------------------------------------------------- helpers


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int]) -> str:
    align = ["---:" if i in right else "---" for i in range(len(headers))]
    lines = [_row(headers), _row(align), *(_row(row) for row in rows)]
    return "\n".join(lines)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


def _cell(text: str) -> str:
    return text.replace("\n", " ").replace("|", "\\|")


def _count(number: int) -> str:
    return f"{number:,}"
