"""Build the small byte-level BPE tokenizer the quickstart config tokenizes with, so the
main job runs offline on a fresh clone: trained on the message texts of the golden
samples (data_samples/expected/*/threads.jsonl), deterministic (same samples -> same bytes).

    python scripts/build_sample_tokenizer.py            # writes configs/sample_tokenizer/
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

REPO = Path(__file__).resolve().parent.parent
VOCAB_SIZE = 2048
"""Small enough to keep the file a few hundred KB, large enough to merge common words."""


def message_texts(expected: Path) -> Iterator[str]:
    """The `content` of every message of every golden thread, in file and line order."""
    for path in sorted(expected.glob("*/threads.jsonl")):
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                for message in json.loads(line)["messages"]:
                    if isinstance(message.get("content"), str):
                        yield message["content"]


def build(expected: Path) -> Tokenizer:
    """A byte-level BPE (every byte is in the alphabet, so any text encodes) trained on
    the golden samples' message texts."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(message_texts(expected)), trainer=trainer)
    return tokenizer


def main() -> None:
    """Write tokenizer.json under --out (default configs/sample_tokenizer)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "configs" / "sample_tokenizer")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer = build(REPO / "data_samples" / "expected")
    (args.out / "tokenizer.json").write_text(tokenizer.to_str(pretty=True) + "\n", "utf-8")
    print(f"wrote {args.out / 'tokenizer.json'} ({tokenizer.get_vocab_size()} tokens)")


if __name__ == "__main__":
    main()
