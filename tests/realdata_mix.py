"""Test helper: the pipeline config of a mix of real files with duplicates (a file read
twice, a weight, a sample), lint, exact and near dedup, three splits, which the engine
tests run to compare outputs byte for byte."""

from __future__ import annotations

from pathlib import Path

from tests.test_run import SAMPLE_TOKENIZER


def write_mix_config(path: Path, realdata: Path, *, engine: str | None = None) -> Path:
    """Write the mix's config at `path` (its own output next to it, unused: tests pass
    `-o`) over `realdata`, tests/data/realdata or ../shared/realdata (the same layout);
    `engine` is the `engine:` mapping, as YAML flow text."""
    lines = f"""name: realdata-mix
inputs:
  - path: {realdata / "llamafactory"}
  - path: {realdata / "openai_finetune_examples"}
    weight: 2
  - path: {realdata / "llamafactory" / "alpaca_en_demo.json"}
    sample: 0.5
stages:
  lint: {{fail_on: never}}
  dedup: {{enabled: true, near: true}}
  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}, max_tokens: 512, overlong: truncate}}
  shard: {{splits: {{train: 0.8, validation: 0.1, test: 0.1}}, seed: 3}}
output: {path.parent / "unused"}
"""
    path.write_text(lines + (f"engine: {engine}\n" if engine else ""))
    return path
