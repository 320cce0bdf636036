"""Outputs published on the Hugging Face Hub, read back: `hf:ORG/NAME[@REVISION]` names a
dataset repository that `mms push` wrote; `huggingface_hub` fetches its files into its
cache, or finds them there when offline (HF_HUB_OFFLINE=1)."""

from __future__ import annotations

from pathlib import Path

from pipeline.sources.paths import HF_PREFIX

OUTPUT_FILES = ["data/*", "tokenizer/*", "reports/*", "quarantine/*", "manifest.json", "README.md"]
"""What an output repository holds (a user's own files in it are not fetched)."""


class OutputNotFound(ValueError):
    """The name is neither a local folder nor a Hub dataset that can be fetched."""


def is_hub_output(source: str | Path) -> bool:
    """Whether `source` names a Hub dataset (`hf:ORG/NAME`) rather than a local folder."""
    return isinstance(source, str) and source.startswith(HF_PREFIX) and "://" not in source


def fetch_output(source: str) -> Path:
    """The local folder of the Hub dataset `hf:ORG/NAME[@REVISION]` (downloaded into the
    Hugging Face cache, or found there offline)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    name = source.removeprefix(HF_PREFIX)
    repo_id, _, revision = name.partition("@")
    if repo_id.count("/") != 1 or repo_id.startswith((".", "/")) or not all(repo_id.split("/")):
        raise OutputNotFound(f"{source}: a Hub dataset is named hf:ORG/NAME[@REVISION]")
    try:
        folder = snapshot_download(
            repo_id, repo_type="dataset", revision=revision or None, allow_patterns=OUTPUT_FILES
        )
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise OutputNotFound(f"the Hub dataset {repo_id} cannot be fetched: {first}") from None
    return Path(folder)
