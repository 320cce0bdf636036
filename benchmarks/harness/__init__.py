"""What every benchmark shares: where the real data and tokenizers are, the corpora
(`corpus`, `synthetic`), timing child processes and in-process jobs (`procs`, `timing`),
running two trees side by side (`trees`), and printing tables (`table`).

A script of benchmarks/ is run as `python benchmarks/NAME.py`, which puts benchmarks/ first
on sys.path: `from harness import corpus` then finds this package. The `pipeline` a script
measures is the one Python imports (PYTHONPATH first), and every child process a script
starts imports the same one (`trees.measured_tree`)."""

from __future__ import annotations

import os
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent
REPO_ROOT = BENCHMARKS.parent
SHARED = Path(os.environ.get("MMS_SHARED", REPO_ROOT.parent / "shared"))
"""The real files and tokenizers the benchmarks read ($MMS_SHARED, default ../shared)."""
DEFAULT_REALDATA = SHARED / "realdata"
DEFAULT_TOKENIZER = SHARED / "tokenizers" / "llama3_from_tiktoken"
MIB = 1024 * 1024
DEFAULT_SEED = 20261121
