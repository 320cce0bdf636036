"""Lint configuration: which rules run, when the run fails, and the rules' tunables;
read from `[tool.mms.lint]` in a pyproject.toml, or from a file given with --config."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

FailOn = Literal["error", "warning", "never"]
FAIL_ON: tuple[str, ...] = ("error", "warning", "never")


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the file and key."""


@dataclass(frozen=True)
class LintConfig:
    """Settings of a lint run. `select`/`ignore` take codes (`MMS201`), families
    (`MMS2`) or `ALL`; a more specific entry wins, as in ruff."""

    select: tuple[str, ...] = ("ALL",)
    ignore: tuple[str, ...] = ()
    fail_on: FailOn = "error"
    min_phrasings: int = 3
    """MMS503: fewest distinct developer phrasings a capability should be enabled with."""
    dataset_min_threads: int = 10
    """MMS502/MMS503: judge only capabilities enabled in at least this many threads."""
    special_tokens: tuple[str, ...] = ()
    """MMS404: literals to flag besides the built-in `<|...|>`, `[INST]`, `</s>` family."""
    max_examples: int = 20
    """HTML/Markdown reports: findings per rule shown with their thread."""
    per_source_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(glob, selectors): findings of those rules on records of matching files are not
    reported (ruff's per-file-ignores). A glob without a leading `/` matches at any depth."""
    source: str | None = None
    """The file the settings came from (None: defaults and the command line)."""

    def replace(self, **changes: Any) -> LintConfig:
        """A copy with the given settings changed; None values are ignored."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


_KEYS: dict[str, str] = {
    "select": "select",
    "ignore": "ignore",
    "fail-on": "fail_on",
    "min-phrasings": "min_phrasings",
    "dataset-min-threads": "dataset_min_threads",
    "special-tokens": "special_tokens",
    "max-examples": "max_examples",
    "per-source-ignores": "per_source_ignores",
}


def load_config(path: str | Path | None = None, start: str | Path | None = None) -> LintConfig:
    """The configuration of `path` (a pyproject.toml with `[tool.mms.lint]`, or a TOML file
    whose top level holds the same keys); without a path, the nearest pyproject.toml
    from `start` (default: the working directory) upwards that has `[tool.mms.lint]`;
    defaults when there is none."""
    if path is not None:
        data = _read_toml(Path(path))
        table = data.get("tool", {}).get("mms", {}).get("lint") if "tool" in data else data
        return _from_table(table or {}, str(path))
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            table = _read_toml(candidate).get("tool", {}).get("mms", {}).get("lint")
            if table is not None:
                return _from_table(table, str(candidate))
    return LintConfig()


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path} is not valid TOML: {err}") from None


def _from_table(table: Any, where: str) -> LintConfig:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [tool.mms.lint] must be a table")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown lint setting(s) {', '.join(unknown)} (known: {', '.join(_KEYS)})"
        )
    values: dict[str, Any] = {}
    for key, value in table.items():
        values[_KEYS[key]] = _checked(key, value, where)
    return LintConfig(**values, source=where)


def _checked(key: str, value: Any, where: str) -> Any:
    if key in ("select", "ignore", "special-tokens"):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: {key} must be a list of strings, got {value!r}")
        return tuple(value)
    if key == "per-source-ignores":
        if not isinstance(value, dict) or not all(
            isinstance(codes, list) and all(isinstance(c, str) for c in codes)
            for codes in value.values()
        ):
            raise ConfigError(
                f"{where}: per-source-ignores must be a table of globs to lists of rule "
                f'codes, e.g. {{"legacy/*.jsonl" = ["MMS105"]}}, got {value!r}'
            )
        return tuple((glob, tuple(codes)) for glob, codes in value.items())
    if key == "fail-on":
        if value not in FAIL_ON:
            raise ConfigError(f"{where}: fail-on must be one of {', '.join(FAIL_ON)}")
        return value
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{where}: {key} must be a positive integer, got {value!r}")
    return value
