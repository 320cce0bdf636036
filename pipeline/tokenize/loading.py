"""Loading a base tokenizer: a `tokenizer.json`, a directory holding one (with its
`tokenizer_config.json`), or a Hub name found in the local Hugging Face cache; every
failure names the file and the cause."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from tokenizers import Tokenizer

CONTROL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token")


class TokenizerLoadError(ValueError):
    """A tokenizer that cannot be loaded; the message names the file (or Hub name) and why."""


@dataclass(frozen=True)
class LoadedTokenizer:
    """A base tokenizer with where it came from and what its config names."""

    tokenizer: Tokenizer
    path: Path
    config: dict[str, Any] = field(default_factory=dict)
    sha256: str = ""
    json_text: str = field(default="", repr=False)
    """The tokenizer.json text, kept so copies need no re-serialization (large vocabularies
    take a second to serialize)."""

    @property
    def control_tokens(self) -> tuple[str, ...]:
        """bos/eos/unk/pad/... tokens the config names (a string or an AddedToken dict)."""
        found = []
        for key in CONTROL_KEYS:
            value = self.config.get(key)
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str) and value:
                found.append(value)
        return tuple(found)

    @property
    def bos_token(self) -> str | None:
        value = self.config.get("bos_token")
        if isinstance(value, dict):
            value = value.get("content")
        return value if isinstance(value, str) and value else None


def load_tokenizer(spec: str | Path) -> LoadedTokenizer:
    """The tokenizer `spec` names: a tokenizer.json file, a directory with one, or a Hub
    name (`org/name`) resolved from the local cache only (this tool never downloads)."""
    path = Path(spec)
    if path.is_dir():
        file = path / "tokenizer.json"
        if not file.is_file():
            raise TokenizerLoadError(f"{path} has no tokenizer.json")
        return _load_file(file, path / "tokenizer_config.json")
    if path.is_file():
        # a tokenizer_config.json beside it belongs to it only when it is the folder's
        # tokenizer.json (test assets keep several tokenizers in one folder)
        config = path.with_name("tokenizer_config.json") if path.name == "tokenizer.json" else None
        return _load_file(path, config)
    if path.suffix or str(spec).startswith((".", "/")) or str(spec).count("/") != 1:
        raise TokenizerLoadError(f"{spec}: no such file or directory")
    return _load_from_hub_cache(str(spec))


def _load_file(file: Path, config_file: Path | None) -> LoadedTokenizer:
    data = file.read_bytes()
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError as err:
        raise TokenizerLoadError(f"cannot load {file}: not valid JSON ({err})") from None
    if not isinstance(parsed, dict) or "model" not in parsed:
        raise TokenizerLoadError(
            f"cannot load {file}: not a tokenizer.json (it has no `model`); pass the "
            "tokenizer.json itself or the folder that holds it"
        )
    text = data.decode("utf-8")
    try:
        tokenizer = Tokenizer.from_str(text)
    except Exception as err:  # tokenizers raises a bare Exception
        raise TokenizerLoadError(f"cannot load {file}: {err}") from None
    config: dict[str, Any] = {}
    if config_file is not None and config_file.is_file():
        try:
            loaded = orjson.loads(config_file.read_bytes())
        except orjson.JSONDecodeError as err:
            raise TokenizerLoadError(f"cannot read {config_file}: {err}") from None
        config = loaded if isinstance(loaded, dict) else {}
    return LoadedTokenizer(tokenizer, file, config, hashlib.sha256(data).hexdigest(), text)


def _load_from_hub_cache(name: str) -> LoadedTokenizer:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(name, "tokenizer.json")
    if not isinstance(found, str):
        raise TokenizerLoadError(
            f"{name}: not a file or directory, and not in the local Hugging Face cache "
            "(this tool does not download; fetch it once with `huggingface-cli download "
            f"{name} tokenizer.json tokenizer_config.json`, or pass a path)"
        )
    file = Path(found)
    config = try_to_load_from_cache(name, "tokenizer_config.json")
    config_file = (
        Path(config) if isinstance(config, str) else file.with_name("tokenizer_config.json")
    )
    return _load_file(file, config_file)
