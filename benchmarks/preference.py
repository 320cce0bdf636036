"""Benchmark preference tokenization: `mms tokenize --objective preference`
against TRL's own DPO dataset preparation (`DPOTrainer._prepare_dataset`: `datasets.map`
with `apply_chat_template` three times per pair, then the common prefix), in one run, on
the same pairs and the same tokenizer (the one mms ships for them, so both render the same
text), one process each.

Run from the repository root (pairs from $MMS_SHARED/realdata, Llama-3's tokenizer from
$MMS_SHARED/tokenizers; default ../shared):

    python benchmarks/preference.py                  # 100,000 pairs
    python benchmarks/preference.py --pairs 20000

What it does: writes --pairs unique pairs (the pairs of LLaMA-Factory's dpo_en_demo, each
copy's prompt and answers marked with its number, so no text repeats) as TRL
conversational preference records (JSONL); tokenizes them with `mms tokenize`; then runs
TRL's preparation on them with the shipped tokenizer (a tiny model stands in, TRL needs one
to build the trainer), and compares the ids pair by pair. Timings are reported, never
asserted.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from harness.corpus import preference_pairs
from harness.options import add_data
from harness.trees import headline


def ours(pairs: Path, tokenizer: Path, out: Path) -> float:
    from click.testing import CliRunner

    from pipeline.cli import main

    start = time.perf_counter()
    command = ["tokenize", str(pairs), "--tokenizer", str(tokenizer), "-o", str(out)]
    command += ["--objective", "preference", "--from", "openai"]
    result = CliRunner().invoke(main, command)
    elapsed = time.perf_counter() - start
    if result.exit_code != 0:
        raise SystemExit(result.output)
    return elapsed


def trl(pairs: Path, shipped: Path) -> tuple[float, object]:
    import datasets
    import transformers
    from trl import DPOConfig, DPOTrainer

    tokenizer = transformers.AutoTokenizer.from_pretrained(shipped)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
    )
    model = transformers.LlamaForCausalLM(config)
    rows = datasets.load_dataset("json", data_files=str(pairs), split="train")
    args = DPOConfig(
        output_dir=tempfile.mkdtemp(), report_to=[], use_cpu=True, bf16=False, max_length=None
    )
    trainer = DPOTrainer(
        model=model,
        ref_model=transformers.LlamaForCausalLM(config),
        args=args,
        train_dataset=rows.select(range(2)),
        processing_class=tokenizer,
    )
    rows = datasets.load_dataset("json", data_files=str(pairs), split="train")
    start = time.perf_counter()
    prepared = trainer._prepare_dataset(rows, tokenizer, args, "bench")
    return time.perf_counter() - start, prepared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    add_data(parser)
    options = parser.parse_args()
    import datasets
    import pyarrow.parquet as pq

    datasets.disable_progress_bars()
    folder = Path(tempfile.mkdtemp())
    pairs = folder / "pairs.jsonl"
    preference_pairs(options.realdata / "llamafactory" / "dpo_en_demo.json", options.pairs, pairs)
    out = folder / "out"
    mms_seconds = ours(pairs, options.tokenizer, out)
    rows = pq.read_table(sorted((out / "data").glob("*.parquet"))).to_pylist()
    tokens = sum(len(r["prompt_ids"]) + len(r["chosen_ids"]) + len(r["rejected_ids"]) for r in rows)
    print(f"pairs {options.pairs:,}, rows {len(rows):,}, tokens (prompt once) {tokens:,}")
    print(f"mms tokenize --objective preference  {mms_seconds:8.2f} s")
    trl_seconds, prepared = trl(pairs, out / "tokenizer")
    print(f"TRL DPOTrainer._prepare_dataset      {trl_seconds:8.2f} s")
    print(f"mms is {trl_seconds / mms_seconds:.2f}x as fast")
    equal = sum(
        1
        for ours_row, theirs in zip(rows, prepared, strict=True)
        if all(ours_row[k] == theirs[k] for k in ("prompt_ids", "chosen_ids", "rejected_ids"))
    )
    print(f"equal ids (prompt, chosen, rejected): {equal:,} of {len(rows):,} pairs")
    headline(lower={"mms tokenize s": mms_seconds}, higher={"TRL / mms": trl_seconds / mms_seconds})


if __name__ == "__main__":
    main()
