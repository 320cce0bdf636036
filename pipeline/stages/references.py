"""The references stage: joins references kept apart from their prompts (BFCL's
`possible_answer` files, pipeline/objectives/references.py) to the threads by id, so the
prompt rows of `--objective prompt` carry them."""

from __future__ import annotations

from typing import Any, ClassVar

from pipeline.stages.contract import Batch, Stage


class AttachReferences(Stage):
    """Sets `meta.reference` of each thread whose id has a reference (a reference the
    thread carries already is kept), counting them (`references:attached`)."""

    name: ClassVar[str] = "references"

    def __init__(self, references: dict[str, Any]):
        self.references = references

    def map(self, batch: Batch) -> Batch:
        attached = 0
        for thread in batch.threads:
            answer = self.references.get(thread.id)
            if answer is not None and thread.meta.get("reference") in (None, "", []):
                thread.meta = {**thread.meta, "reference": answer}
                attached += 1
        if attached:
            batch.tagged["references:attached"] += attached
        return batch
