"""`mms tokenize --objective`: preference rows (one per pair), unpaired
preference rows (one per labelled completion) and prompt rows, each the thread's SFT row
under `last_assistant` cut at its prompt, on every row; threads that cannot make a row
dropped with their reason; TRL's DPO, KTO and GRPO trainers running on the rows as
written."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import REPO, SHARED
from tests.tokenizer_fixtures import shared_present, tokenizer_file

SAMPLES = REPO / "data_samples"
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
PAIR_FILES = [
    SAMPLES / "hh-rlhf" / "pairs.jsonl",
    SAMPLES / "trl" / "preference.jsonl",
    SAMPLES / "openai" / "preference.jsonl",
    SAMPLES / "sharegpt" / "llamafactory_preference.json",
    SAMPLES / "alpaca" / "preference.json",
]
CHECK = "threads = {written} written + {dropped} dropped ✓"


def tokenize(*args: object):
    result = CliRunner().invoke(main, ["tokenize", *map(str, args)])
    assert "Traceback" not in result.output
    return result


def rows_of(out: Path) -> list[dict]:
    return pq.read_table(sorted((out / "data").glob("*.parquet"))).to_pylist()


def dropped_codes(out: Path) -> list[str]:
    path = out / "quarantine" / "dropped.jsonl"
    if not path.exists():
        return []
    return [orjson.loads(line)["code"] for line in path.read_bytes().splitlines()]


def sft_rows(inputs: list[Path], out: Path, tokenizer: Path = SAMPLE_TOKENIZER) -> dict[str, dict]:
    """The SFT rows (`--train-on last_assistant`) of `inputs`, by thread id."""
    result = tokenize(*inputs, "--tokenizer", tokenizer, "-o", out, "--train-on", "last_assistant")
    assert result.exit_code == 0, result.output
    return {row["id"]: row for row in rows_of(out)}


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in records))
    return path


def chat(*turns: tuple[str, str]) -> list[dict]:
    return [{"role": role, "content": content} for role, content in turns]


def assert_cut_of_sft(row: dict, side: str, completion: str, sft: dict) -> None:
    """prompt + the side's completion are the SFT row's ids, and its labels with the
    prompt untrained."""
    prompt = row["prompt_ids"]
    assert prompt + row[f"{completion}_ids"] == sft["input_ids"], side
    assert [-100] * len(prompt) + row[f"{completion}_labels"] == sft["labels"], side
    assert any(label != -100 for label in row[f"{completion}_labels"]), side


# ------------------------------------------------------------------------ preference

TOOL_PAIR = {
    "chosen": [
        {"role": "system", "content": "You can look up the weather."},
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp": -3}'},
        {"role": "assistant", "content": "It is -3 degrees in Oslo."},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ],
}
TOOL_PAIR["rejected"] = [*TOOL_PAIR["chosen"][:2], {"role": "assistant", "content": "Sunny!"}]


def test_preference_rows_are_the_sft_rows_cut_at_the_prompt(tmp_path):
    """Five public preference layouts and a pair whose chosen side calls a tool: one row
    per pair, and prompt + each side is that side's SFT row, ids and labels."""
    inputs = [*PAIR_FILES, write_jsonl(tmp_path / "tools.jsonl", [TOOL_PAIR])]
    out = tmp_path / "pairs"
    result = tokenize(
        *inputs, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--objective", "preference"
    )
    assert result.exit_code == 0, result.output
    assert "✓" in result.output
    sft = sft_rows(inputs, tmp_path / "sft")
    rows = rows_of(out)
    sides = sum(1 for row in sft.values() if orjson.loads(row["meta"]).get("pair_id") is not None)
    dropped = dropped_codes(out)
    assert 2 * len(rows) + sum(1 for code in dropped if code != "not_a_pair") == sides
    assert len(rows) >= 12
    for row in rows:
        meta = orjson.loads(row["meta"])
        assert row["id"] == meta["chosen_id"].replace(":chosen", "") and "preference" not in meta
        assert_cut_of_sft(row, "chosen", "chosen", sft[meta["chosen_id"]])
        assert_cut_of_sft(row, "rejected", "rejected", sft[meta["rejected_id"]])
        assert row["num_prompt_tokens"] == len(row["prompt_ids"])
        assert row["num_chosen_tokens"] == len(row["chosen_ids"])
        assert row["chosen"][0]["role"] == "assistant"
    tool_row = next(row for row in rows if len(row["chosen"]) == 3)
    assert [m["role"] for m in tool_row["prompt"]] == ["developer", "developer", "user"]
    assert tool_row["settings"] is not None  # the declared tool travels with the pair


def test_pairs_that_cannot_make_a_row_are_dropped_with_their_reason(tmp_path):
    question = ("user", "Name a colour.")
    records = [
        {"messages": chat(question, ("assistant", "Red."))},  # no pair
        {
            "chosen": chat(question, ("assistant", "Blue.")),
            "rejected": chat(question, ("assistant", "Blue.")),
        },
        {
            "chosen": chat(("system", "Be brief."), question, ("assistant", "Red.")),
            "rejected": chat(("system", "Be verbose."), question, ("assistant", "Red, I think.")),
        },
        {
            "chosen": chat(question, ("assistant", "Green.")),
            "rejected": chat(question, ("assistant", "Grey.")),
        },
    ]
    out = tmp_path / "out"
    source = write_jsonl(tmp_path / "in.jsonl", records)
    result = tokenize(
        source, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--objective", "preference"
    )
    assert result.exit_code == 0, result.output
    assert CHECK.format(written=2, dropped=5) in result.output
    assert sorted(dropped_codes(out)) == sorted(
        ["not_a_pair", *["pair_sides_identical"] * 2, *["pair_prompts_differ"] * 2]
    )
    assert "1 pair(s)" in result.output


def test_objectives_refuse_settings_that_would_change_the_rows(tmp_path):
    source = PAIR_FILES[0]
    both = ["--tokenizer", SAMPLE_TOKENIZER, "-o", tmp_path / "o", "--objective", "preference"]
    policy = tokenize(source, *both, "--train-on", "assistant")
    assert policy.exit_code == 2 and "last_assistant" in policy.output
    cut = tokenize(source, *both, "--max-tokens", "64", "--overlong", "truncate")
    assert cut.exit_code == 2 and "use drop or error" in cut.output


# -------------------------------------------------------------- unpaired preference

KTO = [
    {"prompt": "Is water wet?", "completion": "Yes, in the everyday sense.", "label": True},
    {"prompt": "Is fire cold?", "completion": "Yes, very.", "label": False},
    {"prompt": "2 + 2?", "chosen": "4", "rejected": "5"},
    {"prompt": "Hello", "completion": "Hi!"},  # no label
]


def test_unpaired_rows_are_labelled_completions(tmp_path):
    source = write_jsonl(tmp_path / "kto.jsonl", KTO)
    out = tmp_path / "kto"
    result = tokenize(
        source, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--objective", "unpaired_preference"
    )
    assert result.exit_code == 0, result.output
    assert CHECK.format(written=4, dropped=1) in result.output
    assert dropped_codes(out) == ["no_preference_label"]
    sft = sft_rows([source], tmp_path / "sft")
    rows = rows_of(out)
    assert [row["label"] for row in rows] == [True, False, True, False]
    for row in rows:
        assert_cut_of_sft(row, row["id"], "completion", sft[row["id"]])


# ---------------------------------------------------------------------------- prompts


def test_prompt_rows_are_what_the_template_renders_with_the_generation_prompt(tmp_path):
    transformers = pytest.importorskip("transformers")
    inputs = [
        SAMPLES / "mt-bench" / "question.jsonl",
        SAMPLES / "alpaca" / "alpaca.json",
        SAMPLES / "openai" / "tool_calls.jsonl",
    ]
    out = tmp_path / "prompts"
    result = tokenize(*inputs, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--objective", "prompt")
    assert result.exit_code == 0, result.output
    tokenizer = transformers.AutoTokenizer.from_pretrained(out / "tokenizer")
    rows = rows_of(out)
    assert len(rows) >= 10
    for row in rows:
        messages = [{k: v for k, v in m.items() if v is not None} for m in row["prompt"]]
        settings = row["settings"]
        tools = settings.get("tools") if settings else None
        rendered = tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, tokenize=True
        )
        ids = rendered["input_ids"] if hasattr(rendered, "keys") else rendered
        assert list(ids) == row["prompt_ids"], row["id"]
        assert row["num_prompt_tokens"] == len(row["prompt_ids"])
    with_reference = [row for row in rows if orjson.loads(row["meta"]).get("reference")]
    assert with_reference, "the MT-Bench sample carries a reference"
    for row in with_reference:
        assert json.loads(row["reference"]) == orjson.loads(row["meta"])["reference"]
    answered = [row for row in rows if row["meta"] and "alpaca" in row["meta"]]
    assert answered and all(row["reference"] for row in answered)


# ------------------------------------------------------------------------------- run


def _run_config(folder: Path, objective: str, workers: int, extra: str = "") -> Path:
    """A run of the pair samples (one weighted twice) with `objective`."""
    inputs = "".join(f"  - path: {path}\n" for path in PAIR_FILES[:-1])
    inputs += f"  - path: {PAIR_FILES[-1]}\n    weight: 2\n"
    config = folder / f"{objective}-{workers}.yaml"
    config.write_text(
        f"name: pairs\ninputs:\n{inputs}output: {folder / f'out-{workers}'}\n"
        "stages:\n  lint: {fail_on: never}\n"
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, objective: {objective}{extra}}}\n"
        f"  shard: {{rows_per_shard: 3}}\nengine: {{workers: {workers}}}\n"
    )
    return config


def test_a_run_writes_preference_rows_the_same_for_any_workers(tmp_path):
    """`stages.tokenize.objective` in `mms run`: pairs kept whole through dedup, splits
    and weights (a weighted copy is a pair of its own), the same bytes with one worker or
    two, each row the tokenize command's row for that pair, and `mms verify` passes."""
    outputs = []
    for workers in (1, 2):
        result = CliRunner().invoke(
            main, ["run", str(_run_config(tmp_path, "preference", workers))]
        )
        assert result.exit_code == 0, result.output
        out = tmp_path / f"out-{workers}"
        outputs.append({p.name: p.read_bytes() for p in sorted((out / "data").glob("*.parquet"))})
    assert outputs[0] == outputs[1]
    out = tmp_path / "out-1"
    rows = rows_of(out)
    ids = [row["id"] for row in rows]
    assert len(ids) == len(set(ids)) and any(i.endswith("#1") for i in ids)
    single = tmp_path / "single"
    made = tokenize(
        *PAIR_FILES, "--tokenizer", SAMPLE_TOKENIZER, "-o", single, "--objective", "preference"
    )
    assert made.exit_code == 0, made.output
    expected = {row["id"]: row for row in rows_of(single)}
    for row in rows:
        twin = expected[row["id"].split("#")[0]]
        for column in (
            "prompt_ids",
            "chosen_ids",
            "rejected_ids",
            "chosen_labels",
            "rejected_labels",
        ):
            assert row[column] == twin[column], (row["id"], column)
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
    card = (out / "README.md").read_text()
    assert "pretokenized(DPOTrainer)" in card and "`chosen_ids`" in card


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (", train_on: assistant", "train_on must be last_assistant"),
        (", max_tokens: 64, overlong: truncate", "truncate cuts the final turn"),
    ],
)
def test_a_run_refuses_settings_that_would_change_objective_rows(tmp_path, extra, message):
    result = CliRunner().invoke(main, ["run", str(_run_config(tmp_path, "preference", 1, extra))])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


# ---------------------------------------------------------------------------- verify


@pytest.mark.parametrize(
    ("objective", "source"),
    [
        ("preference", PAIR_FILES[2]),
        ("unpaired_preference", PAIR_FILES[4]),
        ("prompt", SAMPLES / "mt-bench" / "question.jsonl"),
    ],
)
def test_verify_renders_each_row_again_and_finds_a_moved_prompt_end(tmp_path, objective, source):
    """`mms verify` checks each row as the threads it was cut from: a fresh output
    passes; moving one token from the prompt to the completion (ids still adding up to
    the thread) fails, naming the row."""
    out = tmp_path / "out"
    result = tokenize(source, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--objective", objective)
    assert result.exit_code == 0, result.output
    fresh = CliRunner().invoke(main, ["verify", str(out)])
    assert fresh.exit_code == 0, fresh.output
    assert "rows against the chat template" in fresh.output
    shard = sorted((out / "data").glob("*.parquet"))[0]
    table = pq.read_table(shard)
    rows = table.to_pylist()
    row = rows[0]
    completion = {"preference": "chosen", "unpaired_preference": "completion"}.get(objective)
    moved = row["prompt_ids"].pop()
    if completion is None:  # a prompt row: its ids end early
        row["num_prompt_tokens"] -= 1
    else:
        row[f"{completion}_ids"].insert(0, moved)
        row[f"{completion}_labels"].insert(0, -100)
        row["num_prompt_tokens"] -= 1
        row[f"num_{completion}_tokens"] += 1
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), shard)
    tampered = CliRunner().invoke(main, ["verify", str(out)])
    assert tampered.exit_code == 1
    assert f"row {row['id']}" in tampered.output
    assert "prompt's end" in tampered.output or "input_ids differ" in tampered.output


# ----------------------------------------------------------------------------- stats


def test_stats_count_pairs_their_lengths_and_the_length_bias(tmp_path):
    """Three of four chosen answers are the longer: the share is 75%, far enough from half
    to be pointed out; the JSON holds the figures and validates against its schema."""
    jsonschema = pytest.importorskip("jsonschema")
    question = ("user", "Describe the sea.")
    long = "It is wide, deep, cold and salty, and it covers most of the planet."
    answers = [(long, "Blue."), (long, "Wet."), (long, "Big."), ("Grey.", long)]
    records = [
        {
            "chosen": chat(question, ("assistant", good)),
            "rejected": chat(question, ("assistant", bad)),
        }
        for good, bad in answers
    ]
    out = tmp_path / "pairs"
    source = write_jsonl(tmp_path / "in.jsonl", records)
    assert (
        tokenize(
            source, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--objective", "preference"
        ).exit_code
        == 0
    )
    text = CliRunner().invoke(main, ["stats", str(out)])
    assert text.exit_code == 0, text.output
    assert "train: 4 pairs (preference)" in text.output
    assert (
        "chosen side longer in 75.0% of pairs" in text.output
        and "length for quality" in text.output
    )
    page = CliRunner().invoke(main, ["stats", str(out), "--output-format", "markdown"])
    assert "## train: preference rows" in page.output and "longer in 75.0%" in page.output
    html = tmp_path / "stats.html"
    made = CliRunner().invoke(main, ["stats", str(out), "--output-format", "html", "-o", str(html)])
    assert made.exit_code == 0, made.output
    assert (
        "4 pair rows (preference)" in html.read_text() and "Not tokenized" not in html.read_text()
    )
    figures = CliRunner().invoke(main, ["stats", str(out), "--output-format", "json"])
    stats = json.loads(figures.output)
    schema = json.loads((REPO / "schemas" / "stats.schema.json").read_text())
    jsonschema.validate(stats, schema)
    train = stats["splits"]["train"]
    assert train["threads"] == 8
    assert train["objective"]["rows"] == 4 and train["objective"]["chosen_longer_share"] == 0.75
    rows = rows_of(out)
    assert train["objective"]["prompt_tokens"]["total"] == sum(len(r["prompt_ids"]) for r in rows)


# ---------------------------------------------------------------------------- loader


@pytest.fixture(scope="module")
def pair_output(tmp_path_factory) -> Path:
    """A preference output of the pair samples, three copies of them (more rows)."""
    out = tmp_path_factory.mktemp("pairs") / "out"
    inputs = [*PAIR_FILES, *PAIR_FILES, *PAIR_FILES]
    result = tokenize(
        *inputs,
        "--tokenizer",
        SAMPLE_TOKENIZER,
        "-o",
        out,
        "--objective",
        "preference",
        "--shard-rows",
        "7",
    )
    assert result.exit_code == 0, result.output
    return out


def _unpadded(ids, mask) -> list[tuple[int, ...]]:
    return [
        tuple(int(t) for t, m in zip(row, keep, strict=True) if m)
        for row, keep in zip(ids, mask, strict=True)
    ]


def test_the_loader_gives_each_pair_once_with_both_sides_and_equal_steps(pair_output):
    from pipeline.loader import OutputLoader

    rows = rows_of(pair_output)
    expected = sorted(tuple(r["prompt_ids"] + r["chosen_ids"]) for r in rows)
    seen, steps = [], set()
    for rank in range(2):
        for worker in range(2):
            loader = OutputLoader(
                pair_output,
                batch_size=2,
                rank=rank,
                world_size=2,
                worker=worker,
                num_workers=2,
                even=False,
            )
            for batch in loader:
                half = len(batch["input_ids"]) // 2
                chosen = _unpadded(batch["input_ids"][:half], batch["attention_mask"][:half])
                rejected = _unpadded(batch["input_ids"][half:], batch["attention_mask"][half:])
                seen += chosen
                for c, r, labels in zip(chosen, rejected, batch["labels"][:half], strict=True):
                    row = next(x for x in rows if tuple(x["prompt_ids"] + x["chosen_ids"]) == c)
                    assert r == tuple(row["prompt_ids"] + row["rejected_ids"])
                    assert (
                        list(labels[: len(c)])
                        == [-100] * len(row["prompt_ids"]) + row["chosen_labels"]
                    )
            even = OutputLoader(
                pair_output, batch_size=2, rank=rank, world_size=2, worker=worker, num_workers=2
            )
            steps.add((even.batches_per_epoch(), sum(1 for _ in even)))
    assert sorted(seen) == expected  # every pair once
    assert len(steps) == 1  # every consumer the same steps


def test_the_loader_resumes_and_batches_prompts_padded_on_the_left(pair_output, tmp_path):
    from pipeline.loader import OutputLoader

    loader = OutputLoader(pair_output, batch_size=2, seed=3)
    batches = [batch["input_ids"].tolist() for batch in loader]
    resumed = OutputLoader(pair_output, batch_size=2, seed=3)
    first = iter(resumed)
    next(first)
    state = resumed.state_dict()
    again = OutputLoader(pair_output, batch_size=2, seed=3)
    again.load_state_dict(state)
    assert [batch["input_ids"].tolist() for batch in again] == batches[1:]
    out = tmp_path / "prompts"
    source = SAMPLES / "mt-bench" / "question.jsonl"
    assert (
        tokenize(
            source, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--objective", "prompt"
        ).exit_code
        == 0
    )
    prompts = {tuple(r["prompt_ids"]): r for r in rows_of(out)}
    for batch in OutputLoader(out, batch_size=2, shuffle=False):
        for ids, mask, reference in zip(
            batch["input_ids"], batch["attention_mask"], batch["reference"], strict=True
        ):
            assert mask[-1] == 1  # padded on the left: every prompt ends at the last column
            assert (
                prompts[tuple(int(t) for t, m in zip(ids, mask, strict=True) if m)]["reference"]
                == reference
            )
    with pytest.raises(ValueError, match="mode='padded'"):
        OutputLoader(out, batch_size=2, mode="packed", seq_len=64)


# ---------------------------------------------------------------------- TRL trainers


def _tiny_model(tokenizer) -> object:
    from tests.tiny_llama import tiny_llama

    return tiny_llama(len(tokenizer)).train()


def _spied(trainer) -> list:
    """The (examples, batch) pairs the trainer's collator builds."""
    seen, collate = [], trainer.data_collator

    def spy(examples):
        batch = collate(examples)
        seen.append((examples, batch))
        return batch

    trainer.data_collator = spy
    return seen


@pytest.mark.parametrize("kind", ["dpo", "kto"])
def test_trl_preference_trainers_train_on_the_rows_as_written(tmp_path, kind):
    pytest.importorskip("torch")
    trl = pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    transformers = pytest.importorskip("transformers")
    from pipeline.loader.trl import pretokenized

    objective, source = {
        "dpo": ("preference", PAIR_FILES[2]),
        "kto": ("unpaired_preference", write_jsonl(tmp_path / "kto.jsonl", KTO[:3] * 2)),
    }[kind]
    out = tmp_path / kind
    result = tokenize(source, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--objective", objective)
    assert result.exit_code == 0, result.output
    tokenizer = transformers.AutoTokenizer.from_pretrained(out / "tokenizer")
    rows = datasets.load_dataset("parquet", data_files=str(out / "data" / "*.parquet"))["train"]
    common = {
        "output_dir": str(tmp_path / "run"),
        "per_device_train_batch_size": 2,
        "max_steps": 2,
        "report_to": [],
        "use_cpu": True,
        "bf16": False,
        "max_length": None,
        "save_strategy": "no",
    }
    if kind == "dpo":
        config, trainer_class, completion = trl.DPOConfig(**common), trl.DPOTrainer, "chosen_ids"
    else:
        config = trl.KTOConfig(**common, train_sampling_strategy="sequential")
        trainer_class, completion = trl.KTOTrainer, "completion_ids"
    trainer = pretokenized(trainer_class)(
        model=_tiny_model(tokenizer),
        ref_model=_tiny_model(tokenizer),
        args=config,
        train_dataset=rows,
        processing_class=tokenizer,
    )
    seen = _spied(trainer)
    trainer.train()
    assert trainer.state.global_step == 2
    examples, batch = seen[0]
    for index, example in enumerate(examples):
        ours = example["prompt_ids"] + example[completion]
        assert batch["input_ids"][index][: len(ours)].tolist() == ours


def test_grpo_runs_on_prompt_rows_with_a_reward_reading_the_reference(tmp_path):
    pytest.importorskip("torch")
    trl = pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "prompts"
    source = SAMPLES / "alpaca" / "alpaca.json"
    result = tokenize(source, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--objective", "prompt")
    assert result.exit_code == 0, result.output
    tokenizer = transformers.AutoTokenizer.from_pretrained(out / "tokenizer")
    rows = datasets.load_dataset("parquet", data_files=str(out / "data" / "*.parquet"))["train"]
    references = []

    def overlap(completions, reference, **_):
        references.extend(reference)
        return [
            float(len(set(str(c)) & set(r or "")))
            for c, r in zip(completions, reference, strict=True)
        ]

    config = trl.GRPOConfig(
        output_dir=str(tmp_path / "run"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=4,
        max_steps=1,
        report_to=[],
        use_cpu=True,
        bf16=False,
        save_strategy="no",
    )
    trainer = trl.GRPOTrainer(
        model=_tiny_model(tokenizer),
        reward_funcs=overlap,
        args=config,
        train_dataset=rows,
        processing_class=tokenizer,
    )
    trainer.train()
    assert trainer.state.global_step == 1
    assert references and set(references) <= set(rows["reference"])


# -------------------------------------------------------------------------- realdata


def records(path: Path) -> int:
    """How many records the JSON list or JSON Lines file at `path` holds."""
    if path.suffix == ".jsonl":
        return len(path.read_bytes().splitlines())
    return len(orjson.loads(path.read_bytes()))


@pytest.mark.parametrize("family", ["bytelevel-llama3", "bytelevel-qwen2", "sentencepiece-phi3"])
def test_real_preference_files_cut_exactly_for_three_tokenizers(data, tmp_path, family):
    """LLaMA-Factory's DPO demos (pairs of ShareGPT turns, and OpenAI-style message lists
    with loss weights) and an HH-RLHF-style set (3 pairs), and its KTO demo (labelled
    completions, one holding a literal `</s>`): one row per pair or completion, the cut
    equality on every row. With ../shared, its whole files (300 DPO pairs, 300 KTO
    completions) and the real Llama 3, Qwen 2.5 and Phi-3 tokenizers; on a fresh clone,
    tests/data's copies (4 DPO, 5 KTO) and the small tokenizers of the same families."""
    base = tokenizer_file(family).parent
    real = (SHARED if shared_present() else data) / "realdata" / "llamafactory"
    pairs = [
        real / "dpo_en_demo.json",
        real / "v1_dpo_demo.jsonl",
        SAMPLES / "hh-rlhf" / "pairs.jsonl",
    ]
    unpaired = [real / "kto_en_demo.json"]
    for objective, sources, count, completions in (
        ("preference", pairs, records(pairs[0]) + records(pairs[1]) + 3, ("chosen", "rejected")),
        ("unpaired_preference", unpaired, records(unpaired[0]), ("completion",)),
    ):
        out = tmp_path / objective
        result = tokenize(*sources, "--tokenizer", base, "-o", out, "--objective", objective)
        assert result.exit_code == 0, result.output
        sft = sft_rows(sources, tmp_path / f"sft-{objective}", base)
        rows = rows_of(out)
        assert len(rows) == count and not dropped_codes(out)
        for row in rows:
            meta = orjson.loads(row["meta"])
            for completion in completions:
                thread = meta[f"{completion}_id"] if objective == "preference" else row["id"]
                assert_cut_of_sft(row, completion, completion, sft[thread])


def test_pack_refuses_objective_rows_with_a_clear_error(pair_output, tmp_path):
    result = CliRunner().invoke(
        main, ["pack", str(pair_output), "-o", str(tmp_path / "p"), "--seq-len", "256"]
    )
    assert result.exit_code == 2
    assert "holds preference rows" in result.output and "Traceback" not in result.output


def test_trl_tokenizing_conversational_pairs_itself_gets_our_ids(tmp_path):
    """TRL's own DPO preparation on the same pairs, with the shipped tokenizer (messages
    as most tools write them: no `end_turn`, which ends the turn): the same ids as ours."""
    trl = pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    transformers = pytest.importorskip("transformers")
    records = [
        {
            "prompt": chat(("user", f"Name colour number {n}.")),
            "chosen": chat(("assistant", f"Colour {n} is red.")),
            "rejected": chat(("assistant", "I do not know.")),
        }
        for n in range(4)
    ]
    source = write_jsonl(tmp_path / "pairs.jsonl", records)
    out = tmp_path / "out"
    result = tokenize(
        source, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--objective", "preference"
    )
    assert result.exit_code == 0, result.output
    tokenizer = transformers.AutoTokenizer.from_pretrained(out / "tokenizer")
    args = trl.DPOConfig(
        output_dir=str(tmp_path / "run"), report_to=[], use_cpu=True, bf16=False, max_length=None
    )
    rows = datasets.load_dataset("json", data_files=str(source), split="train")
    trainer = trl.DPOTrainer(
        model=_tiny_model(tokenizer),
        ref_model=_tiny_model(tokenizer),
        args=args,
        train_dataset=rows,
        processing_class=tokenizer,
    )
    for ours, theirs in zip(rows_of(out), trainer.train_dataset, strict=True):
        for column in ("prompt_ids", "chosen_ids", "rejected_ids"):
            assert ours[column] == theirs[column], column


def test_references_kept_apart_join_prompt_rows_by_id(tmp_path):
    """BFCL's possible answers live in files of their own: `--references` joins them to the
    prompt rows by id; a prompt-only entry without one has no reference."""
    answers = tmp_path / "possible_answer.jsonl"
    truth = [{"cylinder_volume": {"radius": [1.75], "height": [12], "unit": ["ml"]}}]
    answers.write_text(json.dumps({"id": "simple_0", "ground_truth": truth}) + "\n")
    out = tmp_path / "prompts"
    source = SAMPLES / "bfcl" / "BFCL_v3_sample.json"
    common = [source, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--objective", "prompt"]
    result = tokenize(*common, "--references", answers)
    assert result.exit_code == 0, result.output
    assert "1 given their reference from --references" in result.output
    rows = {row["id"]: row for row in rows_of(out)}
    assert json.loads(rows["simple_0"]["reference"]) == truth
    others = [row for name, row in rows.items() if name != "simple_0"]
    unanswered = [row for row in others if orjson.loads(row["meta"]).get("prompt_only")]
    assert unanswered and all(row["reference"] is None for row in unanswered)
    (tmp_path / "empty.jsonl").write_text('{"question": "no id"}\n')
    bad = tokenize(*common, "--references", tmp_path / "empty.jsonl")
    assert bad.exit_code == 2 and "no record with an `id`" in bad.output
    wrong = tokenize(source, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--references", answers)
    assert wrong.exit_code == 2 and "--objective prompt" in wrong.output


def test_a_thread_waiting_for_an_answer_is_all_prompt(tmp_path):
    """A thread that ends with the user's turn (or a tool result) after earlier answers:
    its prompt row is the whole thread; as a pair side it has no answer to compare."""
    waiting = chat(("user", "Hi"), ("assistant", "Hello!"), ("user", "And the weather?"))
    source = write_jsonl(tmp_path / "in.jsonl", [{"messages": waiting}])
    out = tmp_path / "prompts"
    result = tokenize(source, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--objective", "prompt")
    assert result.exit_code == 0, result.output
    (row,) = rows_of(out)
    assert [m["content"] for m in row["prompt"]] == ["Hi", "Hello!", "And the weather?"]
    assert row["reference"] is None
    pair = {"chosen": waiting, "rejected": chat(("user", "Hi"), ("assistant", "Hey"))}
    pairs = write_jsonl(tmp_path / "pair.jsonl", [pair])
    result = tokenize(
        pairs, "--tokenizer", SAMPLE_TOKENIZER, "-o", tmp_path / "p", "--objective", "preference"
    )
    assert result.exit_code == 0, result.output
    assert dropped_codes(tmp_path / "p") == ["pair_side_untrained"] * 2


def test_the_readme_grpo_snippet_stops_at_the_shipped_ids_and_rewards_its_references(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("trl")
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "prompts"
    inputs = [SAMPLES / "mt-bench" / "question.jsonl", SAMPLES / "alpaca" / "alpaca.json"]
    result = tokenize(*inputs, "--tokenizer", SAMPLE_TOKENIZER, "-o", out, "--objective", "prompt")
    assert result.exit_code == 0, result.output
    guide = REPO / "docs" / "guides" / "train-preference.md"  # the GRPO recipe of the site
    text = guide.read_text(encoding="utf-8")
    block = next(
        part.split("```")[0] for part in text.split("```python\n")[1:] if "GRPOTrainer(" in part
    )
    head, grpo = block.split("prompts = load_dataset", 1)
    imports = head.split("tokenizer = ")[0]
    small = (
        f"GRPOConfig(output_dir={str(tmp_path / 'run')!r}, per_device_train_batch_size=2, "
        "num_generations=2, max_completion_length=4, max_steps=1, report_to=[], use_cpu=True, "
        "bf16=False, save_strategy='no')"
    )
    code = imports + "prompts = load_dataset" + grpo
    code = code.replace('GRPOConfig(output_dir="grpo")', small).replace("PROMPTS", str(out))
    tokenizer = transformers.AutoTokenizer.from_pretrained(out / "tokenizer")
    namespace = {"model": _tiny_model(tokenizer), "tokenizer": tokenizer}
    exec(compile(code, "guides/train-preference.md#grpo", "exec"), namespace)
    shipped = transformers.GenerationConfig.from_pretrained(out / "tokenizer")
    assert namespace["model"].generation_config.eos_token_id == shipped.eos_token_id
    end_turn = tokenizer.convert_tokens_to_ids("<|end_turn|>")
    assert end_turn in shipped.eos_token_id
    references = [row["reference"] for row in rows_of(out) if row["reference"] is not None]
    listed = [r for r in references if r.startswith("[")]
    assert listed and len(listed) < len(references)  # MT-Bench's JSON lists, alpaca's text
    exact = namespace["exact"]
    for reference in references:
        answer = json.loads(reference)[-1] if reference in listed else reference
        said = [[{"role": "assistant", "content": f"so: {answer}."}]]
        assert exact(said, [reference]) == [1.0]
        assert exact([[{"role": "assistant", "content": ""}]], [reference]) == [0.0]
    assert exact([[{"role": "assistant", "content": "null"}]], [None]) == [0.0]
