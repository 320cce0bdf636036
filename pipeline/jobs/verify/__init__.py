"""`mms verify`: check an output folder without trusting it. output.py checks the files
against the manifest and runs the rest (`verify_output`): card.py the dataset card's YAML
against the files, rows.py every row's input_ids and labels rendered again from its
messages with the shipped tokenizer, template.py the shipped chat template against the
stored rows (when transformers is installed), packed.py and packed_match.py a packed
output's rows as packed and its threads on the rows they were packed from; base.py what
they all share."""

from pipeline.jobs.verify.base import (
    HashFiles,
    OutputError,
    Problem,
    Verification,
    hash_here,
)
from pipeline.jobs.verify.output import verify_output

__all__ = ["HashFiles", "OutputError", "Problem", "Verification", "hash_here", "verify_output"]
