"""A lint baseline: the findings a team has accepted, taken from an earlier JSON report
(`mms lint ... --output-format json -o lint-baseline.json`). With it, only findings the
baseline does not have fail the gate, so a dataset with known problems can gate on new
ones. A finding is matched by rule, file, message and message index, as many times as the
baseline has it: not by its line nor its thread id (a record without an id of its own is
named after its line), so a record that moved in its file is still the same finding."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import orjson

from pipeline.lint.config import ConfigError
from pipeline.lint.diagnostic import Diagnostic

Fingerprint = tuple[str, str | None, int | None, str]


def fingerprint(diagnostic: Diagnostic) -> Fingerprint:
    """What makes two findings the same accepted one."""
    return (diagnostic.code, diagnostic.source, diagnostic.message_index, diagnostic.message)


class Baseline:
    """The accepted findings, counted by fingerprint."""

    def __init__(self, accepted: Iterable[Diagnostic]) -> None:
        self.accepted = Counter(fingerprint(diagnostic) for diagnostic in accepted)

    @classmethod
    def load(cls, path: str | Path) -> Baseline:
        """The baseline of a JSON lint report; ConfigError names what is wrong with it."""
        try:
            report = orjson.loads(Path(path).read_bytes())
        except OSError as err:
            raise ConfigError(f"cannot read the baseline {path}: {err.strerror or err}") from None
        except orjson.JSONDecodeError as err:
            raise ConfigError(f"the baseline {path} is not JSON ({err})") from None
        found = report.get("diagnostics") if isinstance(report, dict) else None
        if not isinstance(found, list):
            raise ConfigError(
                f"the baseline {path} is not a JSON lint report (no `diagnostics`); write one "
                "with `mms lint ... --output-format json -o FILE`"
            )
        try:
            return cls(Diagnostic.from_dict(entry) for entry in found)
        except (KeyError, TypeError, AttributeError):
            raise ConfigError(
                f"the baseline {path} has a diagnostic without code, severity or message"
            ) from None

    def new(self, diagnostics: Iterable[Diagnostic]) -> Iterator[Diagnostic]:
        """The findings beyond what the baseline accepted, in order."""
        left = Counter(self.accepted)
        for diagnostic in diagnostics:
            key = fingerprint(diagnostic)
            if left[key] > 0:
                left[key] -= 1
            else:
                yield diagnostic
