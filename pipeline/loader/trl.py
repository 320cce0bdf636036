"""TRL's preference trainers on mms rows as they are, never tokenized again.

TRL 1.16's `DPOTrainer` and `KTOTrainer` read tokenized examples (`prompt_ids`,
`chosen_ids`, `rejected_ids`; `prompt_ids`, `completion_ids`, `label`) in their collators,
but always tokenize the dataset they are given first, from text columns an mms output
does not need. `pretokenized(Trainer)` is the trainer without that step: the rows go to
its collator as written. KTO's KL estimate pairs each prompt with the completion of its
neighbour in the batch (a training setting, not data): added here as TRL adds it.

    >>> from trl import DPOConfig, DPOTrainer
    >>> trainer = pretokenized(DPOTrainer)(model=model, args=DPOConfig(...),
    ...     train_dataset=load_dataset("parquet", data_files="OUT/data/*.parquet")["train"],
    ...     processing_class=AutoTokenizer.from_pretrained("OUT/tokenizer"))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

Trainer = TypeVar("Trainer", bound=type)


def _with_kl_completions(examples: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Each example's KL completion: the completion before it in its batch (cycled)."""
    completions = examples["completion_ids"]
    examples["KL_completion_ids"] = completions[-1:] + completions[:-1]
    return examples


def pretokenized(trainer: Trainer) -> Trainer:
    """A subclass of the TRL trainer `trainer` that takes mms preference rows as written
    (`--objective preference` for DPOTrainer, `unpaired_preference` for KTOTrainer)."""

    def prepare(self: Any, dataset: Any, processing_class: Any, args: Any, name: str) -> Any:
        if getattr(self, "calculate_KL", False):
            size = args.per_device_train_batch_size
            dataset = dataset.map(_with_kl_completions, batched=True, batch_size=size)
        return dataset

    name = f"Pretokenized{trainer.__name__}"
    subclass = type(
        name, (trainer,), {"_prepare_dataset": prepare, "__doc__": pretokenized.__doc__}
    )
    return cast(Trainer, subclass)  # a subclass of `trainer`, made at run time
