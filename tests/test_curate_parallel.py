# ruff: noqa: RUF001 (the Chinese threads hold full-width punctuation)
"""`mms curate --workers N`: the inputs' parts read and curated in worker processes give
the same kept threads, quarantine, list of dropped threads and counts, byte for byte, as
one process reading every file in turn; with every stage on (decontamination and a plugin
too), on several files and on a big JSON Lines file cut into parts."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from pipeline.accounting import Account
from pipeline.cli import main
from pipeline.jobs.curate import curate, default_dropped_path
from pipeline.jobs.parallel import job_parts
from pipeline.jobs.read import ReadSpec
from pipeline.stages.curate.decontaminate import DecontaminateSettings
from pipeline.stages.curate.language import LanguageSettings
from pipeline.stages.curate.pii import PiiSettings
from pipeline.stages.curate.plugins import PluginSpec
from pipeline.stages.curate.quality import QualityStageSettings
from pipeline.stages.curate.settings import CurationSettings
from tests.conftest import REPO

MT_BENCH = REPO / "data_samples" / "mt-bench" / "question.jsonl"
SPLIT_BYTES = 4096
"""Parts of about 4 KiB: the big file below is cut into many of them."""
PLUGINS = """
def no_urls(thread):
    return "has urls" if any("http" in m.content for m in thread.messages) else None

def explodes(thread):
    raise ValueError("boom")
"""


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A plugin module importable here and in the forked workers."""
    (tmp_path / "par_filters.py").write_text(PLUGINS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "par_filters"
    sys.modules.pop("par_filters", None)


def mt_bench_prompt(number: int) -> str:
    """The first turn of one MT-Bench question."""
    lines = MT_BENCH.read_bytes().splitlines()
    return str(orjson.loads(lines[number % len(lines)])["turns"][0])


def record(number: int) -> bytes:
    """One MMS line of several kinds, varied by `number`: an e-mail to redact, Chinese, an
    MT-Bench question, a URL for the plugin, a repetitive answer, a plain chat; every 37th a
    line that is no thread (quarantined)."""
    if number % 37 == 36:
        return b'{"id": "broken", "messages": [\n'
    kind = number % 6
    user, answer = f"Question {number}: how do I plan week {number}?", "Plan it day by day."
    if kind == 0:
        user = f"Write to person{number}@example.com about the meeting on day {number}."
    elif kind == 1:
        user, answer = "法国的首都是哪里？请告诉我。", f"是巴黎。这是法国的首都。第{number}个。"
    elif kind == 2:
        user = mt_bench_prompt(number)
    elif kind == 3:
        answer = f"See http://example.com/{number} for the plan."
    elif kind == 4:
        answer = "again " * 80
    messages = [
        {"role": "user", "content": user},
        {"role": "assistant", "content": answer, "end_turn": True},
    ]
    return orjson.dumps({"id": f"t-{number:05d}", "messages": messages}) + b"\n"


def write_inputs(folder: Path) -> list[str]:
    """Three small files and a big one (cut into parts), in a folder of their own."""
    folder.mkdir()
    for index, name in enumerate(("a", "b", "c")):
        (folder / f"{name}.jsonl").write_bytes(b"".join(map(record, range(index, 90, 3))))
    (folder / "big.jsonl").write_bytes(b"".join(map(record, range(1000, 1600))))
    return [str(folder)]


def every_stage(plugin: str) -> CurationSettings:
    """PII redaction, English kept, quality drops, MT-Bench decontamination, a plugin."""
    return CurationSettings(
        pii=PiiSettings(),
        language=LanguageSettings(languages=("en",)),
        quality=QualityStageSettings(action="drop"),
        decontaminate=DecontaminateSettings(against=(str(MT_BENCH),)),
        plugins=(PluginSpec(f"{plugin}:no_urls"),),
    )


def test_parts_curate_to_the_same_bytes_and_counts_for_any_workers(tmp_path, plugin_module):
    inputs = write_inputs(tmp_path / "in")
    spec = ReadSpec("mms")
    assert len(job_parts(inputs, spec, Account(), 2, SPLIT_BYTES)) > 10
    results = {}
    for workers in (1, 2, 3):
        out = tmp_path / f"w{workers}" / "threads.jsonl"
        result = curate(
            inputs, out, every_stage(plugin_module), spec, workers=workers, split_bytes=SPLIT_BYTES
        )
        account = result.account
        assert account.balanced and account.quarantined_total == 18
        results[workers] = (
            out.read_bytes(),
            result.quarantine.read_bytes(),
            result.dropped.read_bytes(),
            account.to_dict(),
            dict(account.tagged),
            dict(account.dropped),
            account.files,
        )
    assert results[1] == results[2] == results[3]
    dropped = results[1][5]
    assert {"contaminated", "language:zh", "plugin:no_urls:has urls"} <= set(dropped)
    assert any(reason.startswith("quality:") for reason in dropped)
    assert results[1][4]["pii:redacted:EMAIL"] == 111
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def cli(*args: object) -> Result:
    return CliRunner().invoke(main, [str(arg) for arg in args])


def test_real_files_and_the_summary_are_the_same_through_the_cli(data, tmp_path, plugin_module):
    options = ["--redact-pii", "--languages", "en", "--quality", "drop", "--against", MT_BENCH]
    outputs = []
    for workers in (1, 2, 3):
        out = tmp_path / "out" / "threads.jsonl.gz"
        result = cli(
            "curate", data / "realdata", "-o", out, *options,
            "--plugin", f"{plugin_module}:no_urls", "--workers", workers,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        dropped = default_dropped_path(out)
        outputs.append((result.output, out.read_bytes(), dropped.read_bytes()))
    assert outputs[0] == outputs[1] == outputs[2]
    summary = outputs[0][0]
    assert "language:zh" in summary and summary.rstrip().endswith("dropped ✓")


def test_a_plugin_failing_in_a_worker_is_one_clear_line(tmp_path, plugin_module):
    inputs = write_inputs(tmp_path / "in")
    out = tmp_path / "out" / "threads.jsonl"
    plugin = f"{plugin_module}:explodes"
    result = cli("curate", *inputs, "-o", out, "--from", "mms", "--plugin", plugin, "--workers", 2)
    assert result.exit_code == 1
    assert f"error: plugin {plugin} raised ValueError: boom on thread" in result.output
    assert "Traceback" not in result.output and "part " not in result.output
    assert list((tmp_path / "out").iterdir()) == []  # nothing written, no work dir left
