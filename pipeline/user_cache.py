"""The one folder mms keeps things in for the user across runs: what is proven about a
tokenizer file (pipeline/tokenize/proofs.py), the HTML pages' compiled templates
(pipeline/lint/reports/page.py), the files of stored outputs read (pipeline/output/stored.py).
MMS_CACHE_DIR names it (`off`: none), else $XDG_CACHE_HOME/mms-pipeline or
~/.cache/mms-pipeline."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "MMS_CACHE_DIR"
OFF = "off"


def cache_folder() -> Path | None:
    """Where mms keeps things for the user, None when the cache is off."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen == OFF:
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mms-pipeline"
