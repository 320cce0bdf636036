"""Loading a base tokenizer: a `tokenizer.json`, a directory holding one (with its
`tokenizer_config.json`), or a Hub name found in the local Hugging Face cache; every
failure names the file and the cause."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any

import orjson
from tokenizers import Tokenizer

from pipeline.tokenize.proofs import remembered
from pipeline.tokenize.text_encoding import TextEncoder, build_text_encoder
from pipeline.tokenize.tiktoken_encoder import encoder_from_recipe, tiktoken_recipe

CONTROL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token")


class TokenizerLoadError(ValueError):
    """A tokenizer that cannot be loaded; the message names the file (or Hub name) and why."""


@dataclass(frozen=True)
class LoadedTokenizer:
    """A base tokenizer with where it came from and what its config names. Loading builds
    the renderer's text encoder (tiktoken where it gives the same ids, else one parse by
    `tokenizers`); the tokenizer as its file has it is parsed only when asked for (a large
    vocabulary takes a second to parse)."""

    path: Path
    config: dict[str, Any]
    sha256: str
    json_bytes: bytes = field(repr=False)
    """The tokenizer.json as read, kept so the augmented copy needs no re-serialization."""
    text_encoder: TextEncoder = field(repr=False)
    """Encodes content with no special-token matching (`text_encoding.build_text_encoder`)."""

    @cached_property
    def tokenizer(self) -> Tokenizer:
        """The base tokenizer as its file has it, parsed on first use."""
        try:
            return Tokenizer.from_str(self.json_bytes.decode("utf-8"))
        except Exception as err:  # tokenizers raises a bare Exception
            raise TokenizerLoadError(f"cannot load {self.path}: {err}") from None

    @cached_property
    def special_tokens(self) -> tuple[str, ...]:
        """The strings this tokenizer encodes as special tokens: its added tokens flagged
        special, then the control tokens its config names (bos/eos/unk/pad ...), each once.
        Content spelling one is encoded as text, never as the token (lint's MMS404). The
        flagged ones are remembered per file: finding them parses the whole tokenizer.json."""
        found = remembered(self.sha256, SPECIAL_FACT, partial(_flagged_special, self.json_bytes))
        return tuple(dict.fromkeys([*found, *self.control_tokens]))

    @property
    def control_tokens(self) -> tuple[str, ...]:
        """bos/eos/unk/pad/... tokens the config names (a string or an AddedToken dict)."""
        return _control_tokens(self.config)

    @property
    def bos_token(self) -> str | None:
        """The BOS token the config names, if any."""
        return _token(self.config, "bos_token")

    def named(self, key: str) -> str | None:
        """The token the config names under `key` (`eos_token`, `pad_token` ...), if any."""
        return _token(self.config, key)


def _flagged_special(json_bytes: bytes) -> list[str]:
    """The added tokens a tokenizer.json flags special, in its order."""
    try:
        added = orjson.loads(json_bytes).get("added_tokens")
    except orjson.JSONDecodeError:  # loaded, so never: its encoder was built from it
        added = None
    flagged = (
        entry.get("content")
        for entry in (added if isinstance(added, list) else [])
        if isinstance(entry, dict) and entry.get("special") is True
    )
    return [token for token in flagged if isinstance(token, str) and token]


def _token(config: dict[str, Any], key: str) -> str | None:
    """The token `config[key]` names (a string or an AddedToken dict), if any."""
    value = config.get(key)
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _control_tokens(config: dict[str, Any]) -> tuple[str, ...]:
    """The tokens `config` names under CONTROL_KEYS, in that order."""
    found = (_token(config, key) for key in CONTROL_KEYS)
    return tuple(token for token in found if token is not None)


def load_tokenizer(spec: str | Path, *, allow_tiktoken: bool = True) -> LoadedTokenizer:
    """The tokenizer `spec` names: a tokenizer.json file, a directory with one, or a Hub
    name (`org/name`) resolved from the local cache only (this tool never downloads).
    `allow_tiktoken=False` keeps the `tokenizers` encoder even where tiktoken would do."""
    return _load_file(*tokenizer_files(spec), allow_tiktoken=allow_tiktoken)


def tokenizer_files(spec: str | Path) -> tuple[Path, Path | None]:
    """The tokenizer.json `spec` names and the tokenizer_config.json that goes with it (None
    when it cannot have one), without reading them: what a run watches for changes."""
    path = Path(spec)
    if path.is_dir():
        file = path / "tokenizer.json"
        if not file.is_file():
            raise TokenizerLoadError(f"{path} has no tokenizer.json")
        return file, path / "tokenizer_config.json"
    if path.is_file():
        # a tokenizer_config.json beside it belongs to it only when it is the folder's
        # tokenizer.json (test assets keep several tokenizers in one folder)
        config = path.with_name("tokenizer_config.json") if path.name == "tokenizer.json" else None
        return path, config
    if not hub_name(str(spec)):
        raise TokenizerLoadError(f"{spec}: no such file or directory")
    return _hub_cache_files(str(spec))


_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def hub_name(spec: str) -> bool:
    """Whether `spec`, naming no local file, reads as a Hub repository (ORG/NAME, dots
    allowed: `Qwen/Qwen2.5-7B`), not as a path (`./x`, `/x`, `x.json`)."""
    return bool(_HUB_NAME.fullmatch(spec)) and not spec.endswith(".json")


def hub_cache_folder() -> str:
    """Where the Hugging Face cache keeps Hub files (HF_HUB_CACHE, HF_HOME ...)."""
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


FILE_FACT = "tokenizer_file"
RECIPE_FACT = "tiktoken_recipe"
"""What the tiktoken encoder of a file is built from (None: tiktoken does not give its ids),
per control tokens of its config."""
"""The proof that a file is a tokenizer.json `check_tokenizer` accepts."""
SPECIAL_FACT = "flagged_special_tokens"
"""The added tokens a file flags special (`LoadedTokenizer.special_tokens`)."""
MODEL_VOCABULARIES: dict[str, type] = {
    "BPE": dict,
    "WordPiece": dict,
    "WordLevel": dict,
    "Unigram": list,
}
"""The model types of a tokenizer.json, and the JSON type of each one's `vocab`."""


def check_tokenizer(spec: str | Path) -> None:
    """Check, cheaply and without building it, that `spec` names a tokenizer: its
    tokenizer.json is JSON with a `model` of a known type, with the vocabulary that type
    needs (and a BPE its merges), and its tokenizer_config.json (if any) is a JSON object.
    Raises TokenizerLoadError."""
    file, config_file = tokenizer_files(spec)
    try:
        data, sha256 = _file_bytes(file)
    except OSError as err:
        raise TokenizerLoadError(f"cannot read {file}: {err.strerror or err}") from None
    remembered(sha256, FILE_FACT, partial(_check_model, file, data))
    _config(config_file)


_last_read: tuple[tuple[str, int, int, int, int], bytes, str] | None = None
"""The file `_file_bytes` read last, with its (path, inode, size, mtime, ctime) then."""


def _file_bytes(file: Path) -> tuple[bytes, str]:
    """The bytes of `file` and their sha256. The last file read is remembered while its
    stat is the same: a run checks the tokenizer file, then loads it (17 MB for a 128k
    vocabulary, read and hashed in a twentieth of a second)."""
    global _last_read
    stat = file.stat()
    key = (str(file.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    if _last_read is not None and _last_read[0] == key:
        return _last_read[1], _last_read[2]
    data = file.read_bytes()
    sha256 = hashlib.sha256(data).hexdigest()
    _last_read = (key, data, sha256)
    return data, sha256


def _check_model(file: Path, data: bytes) -> bool:
    """True when `data` is a tokenizer.json with a model `check_tokenizer` accepts; raises
    TokenizerLoadError otherwise."""
    model = _tokenizer_json(file, data)["model"]
    kind = model.get("type") if isinstance(model, dict) else None
    if kind not in MODEL_VOCABULARIES:
        known = ", ".join(MODEL_VOCABULARIES)
        raise TokenizerLoadError(
            f"cannot load {file}: unknown model type {kind!r} (known: {known})"
        )
    vocab = model.get("vocab")
    if not isinstance(vocab, MODEL_VOCABULARIES[kind]) or not vocab:
        raise TokenizerLoadError(f"cannot load {file}: its {kind} model has no vocab")
    if kind == "BPE" and not isinstance(model.get("merges"), list):
        raise TokenizerLoadError(f"cannot load {file}: its BPE model has no merges")
    return True


def _load_file(file: Path, config_file: Path | None, *, allow_tiktoken: bool) -> LoadedTokenizer:
    data, sha256 = _file_bytes(file)
    config = _config(config_file)
    controls = _control_tokens(config)

    def recipe() -> dict[str, Any] | None:
        return tiktoken_recipe(_tokenizer_json(file, data), controls)

    try:
        # remembered: a later load of the same file parses no tokenizer.json
        fact = RECIPE_FACT + ":" + "\n".join(controls)
        found = remembered(sha256, fact, recipe) if allow_tiktoken else None
        encoder: TextEncoder | None = encoder_from_recipe(found) if found is not None else None
        if encoder is None:
            encoder = build_text_encoder(_tokenizer_json(file, data), controls)
    except TokenizerLoadError:
        raise
    except Exception as err:  # tokenizers raises a bare Exception
        raise TokenizerLoadError(f"cannot load {file}: {_cause(data, err)}") from None
    return LoadedTokenizer(file, config, sha256, data, encoder)


def _tokenizer_json(file: Path, data: bytes) -> dict[str, Any]:
    """`data` parsed, if it is a tokenizer.json at all."""
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError as err:
        raise TokenizerLoadError(f"cannot load {file}: not valid JSON ({err})") from None
    if not isinstance(parsed, dict) or "model" not in parsed:
        raise TokenizerLoadError(
            f"cannot load {file}: not a tokenizer.json (it has no `model`); pass the "
            "tokenizer.json itself or the folder that holds it"
        )
    return parsed


def _config(config_file: Path | None) -> dict[str, Any]:
    """The tokenizer_config.json beside the tokenizer, or {} when there is none."""
    if config_file is None or not config_file.is_file():
        return {}
    try:
        loaded = orjson.loads(config_file.read_bytes())
    except orjson.JSONDecodeError as err:
        raise TokenizerLoadError(f"cannot read {config_file}: {err}") from None
    return loaded if isinstance(loaded, dict) else {}


def _cause(data: bytes, err: Exception) -> Exception:
    """Why `tokenizers` refuses the file as it is (its message places the fault in the
    file), or `err` when only the text encoder made of it fails."""
    try:
        Tokenizer.from_str(data.decode("utf-8"))
    except Exception as refused:  # tokenizers raises a bare Exception
        return refused
    return err


def _hub_cache_files(name: str) -> tuple[Path, Path | None]:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(name, "tokenizer.json")
    if not isinstance(found, str):
        raise TokenizerLoadError(
            f"{name}: not a file or directory, and not in the local Hugging Face cache "
            f"(looked in {hub_cache_folder()}; this tool does not download: fetch it once "
            f"with `huggingface-cli download {name} tokenizer.json tokenizer_config.json`, "
            "or pass a path)"
        )
    file = Path(found)
    config = try_to_load_from_cache(name, "tokenizer_config.json")
    return file, Path(config) if isinstance(config, str) else file.with_name(
        "tokenizer_config.json"
    )
