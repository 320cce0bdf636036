"""The `mms run` pipeline config: the shipped configs load, defaults fill in, relative paths
follow the config file, mistakes are reported with their line, and the digest tracks values."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pipeline.cli import main
from pipeline.engine import LocalRunner
from pipeline.formats import ConvertOptions
from pipeline.jobs.run import engine_runner
from pipeline.jobs.run.config import (
    EngineConfig,
    InputSpec,
    PushSettings,
    RunConfigError,
    load_run_config,
)
from pipeline.lint import LintConfig
from pipeline.lint.config import FAIL_ON
from pipeline.output.shards import SHARD_ROWS
from pipeline.schemas import schema_path
from pipeline.stages.filters import FilterSettings
from pipeline.stages.lint import LintSettings
from pipeline.stages.normalize import NormalizeSettings
from pipeline.stages.split import ShardSettings
from pipeline.tokenize.overlong import OVERLONG_POLICIES

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "configs"
LOCAL_CONFIGS = sorted(p.name for p in CONFIGS.glob("*.yaml"))

MINIMAL = """\
name: tiny
inputs:
  - path: data
output: out
"""


def write(folder: Path, text: str, name: str = "job.yaml") -> Path:
    """A config file `name` holding `text` in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(folder: Path, text: str) -> RunConfigError:
    """The RunConfigError loading `text` raises."""
    path = write(folder, text)
    with pytest.raises(RunConfigError) as caught:
        load_run_config(path)
    assert caught.value.file == str(path)
    assert str(caught.value).startswith(f"{path}: ")
    return caught.value


@pytest.mark.parametrize("name", LOCAL_CONFIGS)
def test_shipped_configs_load(name: str) -> None:
    config = load_run_config(CONFIGS / name)
    for spec in config.inputs:
        assert Path(spec.path).exists(), spec.path
    assert config.output.parent == REPO / "out"
    assert config.resolved()["name"] == config.name


def test_shipped_config_list_is_complete() -> None:
    names = {p.name for p in CONFIGS.glob("*.yaml")}
    assert {"quickstart.yaml", "tool_calling.yaml", "mix.yaml", "lint_only.yaml"} <= names


def test_bundled_configs_need_nothing_outside_the_repository() -> None:
    """A fresh clone runs every bundled config: inputs and tokenizers are in the repo."""
    for name in LOCAL_CONFIGS:
        config = load_run_config(CONFIGS / name)
        for spec in config.inputs:
            assert Path(spec.path).resolve().is_relative_to(REPO), (name, spec.path)
        if config.stages.tokenize is not None:
            assert Path(config.stages.tokenize.tokenizer).resolve().is_relative_to(REPO), name


def test_quickstart_tokenizes_with_the_shipped_tokenizer() -> None:
    config = load_run_config(CONFIGS / "quickstart.yaml")
    assert config.stages.tokenize is not None
    assert Path(config.stages.tokenize.tokenizer) == CONFIGS / "sample_tokenizer"
    assert (CONFIGS / "sample_tokenizer" / "tokenizer.json").stat().st_size < 400_000
    assert dict(config.stages.shard.splits) == {"train": 0.9, "test": 0.1}


def test_lint_only_writes_no_shards() -> None:
    config = load_run_config(CONFIGS / "lint_only.yaml")
    assert config.stages.shard is None and config.stages.tokenize is None
    assert config.resolved()["stages"]["shard"] is False
    assert config.stages.lint.fail_on == "warning"


def test_defaults_fill_every_stage(tmp_path: Path) -> None:
    config = load_run_config(write(tmp_path, MINIMAL))
    assert config.inputs == (InputSpec(path=str(tmp_path / "data")),)
    stages = config.stages
    assert stages.normalize == NormalizeSettings()
    assert stages.lint == LintSettings(select=("ALL",), ignore=(), fail_on="error", drop_on=())
    assert stages.filters == FilterSettings(1, None, 1, None)
    assert stages.dedup.enabled is True
    assert stages.tokenize is None
    assert stages.shard == ShardSettings(SHARD_ROWS, (("train", 1.0),), 0, "zstd")
    assert config.engine == EngineConfig(kind="local", workers=None)
    assert engine_runner(config) == LocalRunner(workers=2)  # the local engine's default
    resolved = config.resolved()
    assert resolved["stages"]["tokenize"] is None
    assert resolved["stages"]["shard"]["splits"] == {"train": 1.0}
    assert resolved["inputs"][0] == {
        "path": "data",  # as the config names it, relative to its folder
        "format": "auto",
        "split": None,
        "hf_config": None,
        "sample": 1.0,
        "weight": 1,
        "license": None,
        "tags": [],
        "language": [],
    }
    assert json.loads(json.dumps(resolved)) == resolved


def test_stage_options_convert_to_the_stage_apis(tmp_path: Path) -> None:
    text = MINIMAL + (
        "stages:\n"
        "  normalize: {parallel_calls: jsonl, oasst_paths: top, expand_selects: 3}\n"
        "  lint: {select: [MMS2], ignore: [MMS207], fail_on: warning, min_phrasings: 5}\n"
    )
    config = load_run_config(write(tmp_path, text))
    options = config.stages.normalize.to_convert_options()
    assert options == ConvertOptions(parallel_calls="jsonl", oasst_paths="top", expand_selects=3)
    lint = config.stages.lint.to_lint_config(source="job.yaml")
    assert lint == LintConfig(
        select=("MMS2",), ignore=("MMS207",), fail_on="warning", min_phrasings=5, source="job.yaml"
    )


def test_relative_paths_follow_the_config_file_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenizer = tmp_path / "assets" / "tok"
    tokenizer.mkdir(parents=True)
    (tokenizer / "tokenizer.json").write_bytes(
        (REPO / "configs" / "sample_tokenizer" / "tokenizer.json").read_bytes()
    )
    (tmp_path / "local_ds").mkdir()
    text = (
        "name: rel\n"
        "inputs:\n"
        "  - path: ../raw/*.jsonl\n"
        "  - path: hf:../local_ds\n"
        "    split: validation\n"
        "  - path: hf:org/dataset\n"
        "    hf_config: en\n"
        "  - path: /abs/file.jsonl\n"
        "stages:\n"
        "  tokenize: {tokenizer: ../assets/tok}\n"
        "output: ../out/rel\n"
    )
    path = write(tmp_path / "configs", text)
    monkeypatch.chdir(tmp_path / "assets")
    config = load_run_config(Path("../configs/job.yaml"))
    paths = [spec.path for spec in config.inputs]
    assert paths == [
        str(tmp_path / "raw" / "*.jsonl"),
        f"hf:{tmp_path / 'local_ds'}",
        "hf:org/dataset",
        "/abs/file.jsonl",
    ]
    assert [(s.split, s.hf_config) for s in config.inputs] == [
        (None, None),
        ("validation", None),
        ("train", "en"),
        (None, None),
    ]
    assert config.stages.tokenize is not None
    assert config.stages.tokenize.tokenizer == str(tokenizer)
    assert config.output == tmp_path / "out" / "rel"
    assert config.source == path


TOKENIZE_SECTION = MINIMAL + "stages:\n  dedup: {enabled: false}\n  tokenize:\n"


@pytest.mark.parametrize(
    ("text", "path", "line", "reason"),
    [
        (
            MINIMAL + "stages:\n  normalize:\n    parralel_calls: jsonl\n",
            "stages.normalize.parralel_calls",
            7,
            "unknown key 'parralel_calls' (known: parallel_calls, reasoning, multimodal, "
            "oasst_paths, expand_selects); did you mean 'parallel_calls'?",
        ),
        (
            TOKENIZE_SECTION + "    tokenizer: tok.json\n    overlong: cut\n",
            "stages.tokenize.overlong",
            9,
            "'cut' is not one of ['drop', 'truncate', 'error']",
        ),
        (
            MINIMAL + "stages:\n  shard:\n    seed: 3\n    splits:\n      train: 0.8\n"
            "      test: 0.1\n",
            "stages.shard.splits",
            8,
            "split fractions must sum to 1, these sum to 0.9 (train 0.8 + test 0.1)",
        ),
        (
            MINIMAL + "stages:\n  lint:\n    select: [MMS2]\n    drop_on:\n      - MMS201\n"
            "      - MMS999\n",
            "stages.lint.drop_on[1]",
            10,
            "no rule 'MMS999'; rules are",
        ),
        (
            TOKENIZE_SECTION + "    max_tokens: 512\n    tokenizer: ../missing/tokenizer\n",
            "stages.tokenize.tokenizer",
            9,
            "no such file or directory: ",
        ),
        (
            "name: x\ninputs:\n  - path: a.jsonl\n    format: opena\noutput: o\n",
            "inputs[0].format",
            4,
            "unknown format 'opena' (known: auto, alpaca,",
        ),
        (
            "name: x\ninputs:\n  - path: a.jsonl\n    split: test\noutput: o\n",
            "inputs[0].split",
            4,
            "split applies to hf: inputs only ('a.jsonl' is not one)",
        ),
        (
            "name: x\ninputs:\n  - path: a.jsonl\n    sample: 0\noutput: o\n",
            "inputs[0].sample",
            4,
            "0 is less than or equal to the minimum of 0",
        ),
        (
            "name: x\ninputs: []\noutput: o\n",
            "inputs",
            2,
            "[] should be non-empty",
        ),
        (
            "name: x\ninputs:\n  - path: a\n",
            "",
            1,
            "'output' is a required property",
        ),
        (
            MINIMAL + "stages:\n  lint:\n    select: [MMS1]\n    drop_on: [MMS201]\n",
            "stages.lint.drop_on[0]",
            8,
            "MMS201 is not among the selected rules, so it could drop nothing",
        ),
        (
            MINIMAL + "stages:\n  filters:\n    max_tokens: 100\n",
            "stages.filters.max_tokens",
            7,
            "counts tokens, so it needs a stages.tokenize section",
        ),
        (
            MINIMAL + "output: again\n",
            "",
            5,
            "duplicate key 'output' (first at line 4)",
        ),
        (
            MINIMAL + "stages:\n  shard:\n    compression: lzma\n",
            "stages.shard.compression",
            7,
            "'lzma' is not one of ['zstd', 'snappy', 'gzip', 'none']",
        ),
    ],
    ids=[
        "typo-key",
        "wrong-enum",
        "splits-sum",
        "unknown-lint-code",
        "missing-tokenizer",
        "unknown-format",
        "split-on-file",
        "sample-zero",
        "no-inputs",
        "missing-output",
        "drop-on-unselected",
        "token-filter-untokenized",
        "duplicate-key",
        "bad-shard",
    ],
)
def test_mistakes_name_path_line_and_reason(
    tmp_path: Path, text: str, path: str, line: int, reason: str
) -> None:
    err = error_of(tmp_path, text)
    assert (err.path, err.line) == (path, line), str(err)
    assert reason in err.reason
    assert str(err).endswith(f" (line {line})")


def test_error_message_reads_as_one_line(tmp_path: Path) -> None:
    err = error_of(tmp_path, TOKENIZE_SECTION + "    tokenizer: t\n    overlong: cut\n")
    expected = (
        f"{tmp_path / 'job.yaml'}: stages.tokenize.overlong: 'cut' is not one of "
        "['drop', 'truncate', 'error'] (line 9)"
    )
    assert str(err) == expected


def test_yaml_that_asks_for_python_objects_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = f"name: !!python/object/apply:os.system ['touch {marker}']\ninputs: []\noutput: o\n"
    err = error_of(tmp_path, text)
    assert "refused the YAML tag !!python/object/apply:os.system" in err.reason
    assert not marker.exists()


def test_broken_yaml_names_its_line(tmp_path: Path) -> None:
    err = error_of(tmp_path, "name: x\ninputs:\n  - path: [a\noutput: o\n")
    assert err.reason.startswith("not valid YAML")
    assert err.line == 4


def test_digest_is_stable_and_tracks_every_value(tmp_path: Path) -> None:
    first = load_run_config(write(tmp_path, MINIMAL))
    again = load_run_config(write(tmp_path, "# same job\n" + MINIMAL.replace("tiny", "'tiny'")))
    assert first.digest() == again.digest()
    assert len(first.digest()) == 64
    explicit = MINIMAL + "stages:\n  dedup: {enabled: true}\nengine: {workers: 2}\n"
    assert load_run_config(write(tmp_path, explicit)).digest() == first.digest()
    on_ray = MINIMAL + "engine: {kind: ray, workers: 8, address: auto}\n"
    assert load_run_config(write(tmp_path, on_ray)).digest() == first.digest()  # same output
    changed = MINIMAL + "stages:\n  shard: {seed: 1}\n"
    assert load_run_config(write(tmp_path, changed)).digest() != first.digest()
    weighted = MINIMAL.replace("path: data", "path: data\n    weight: 2")
    assert load_run_config(write(tmp_path, weighted)).digest() != first.digest()


def test_schema_enums_match_the_stage_apis() -> None:
    schema = json.loads(schema_path("pipeline-config").read_text(encoding="utf-8"))
    stages = schema["properties"]["stages"]["properties"]
    hints = typing.get_type_hints(ConvertOptions)
    for key, prop in stages["normalize"]["properties"].items():
        if "enum" in prop:
            assert tuple(prop["enum"]) == typing.get_args(hints[key]), key
    assert tuple(stages["tokenize"]["properties"]["overlong"]["enum"]) == OVERLONG_POLICIES
    assert tuple(stages["lint"]["properties"]["fail_on"]["enum"]) == FAIL_ON
    shard = stages["shard"]["oneOf"][1]["properties"]
    assert shard["rows_per_shard"]["default"] == SHARD_ROWS


def test_ray_settings_apply_only_to_the_ray_engine(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL + "engine:\n  workers: 2\n  address: auto\n")
    assert err.reason == "applies only with `kind: ray`" and err.line == 7
    config = load_run_config(write(tmp_path, MINIMAL + "engine: {kind: ray, num_cpus: 2}\n"))
    assert config.engine == EngineConfig(kind="ray", num_cpus=2)
    assert config.resolved()["engine"] == {"kind": "ray", "num_cpus": 2}


def test_push_to_hub_is_read_and_left_out_of_the_digest(tmp_path: Path) -> None:
    plain = load_run_config(write(tmp_path, MINIMAL))
    named = MINIMAL.replace("output: out", "output:\n  path: out\n  push_to_hub: me/data")
    config = load_run_config(write(tmp_path, named))
    assert config.push == PushSettings("me/data") and config.output == plain.output
    assert config.digest() == plain.digest()  # where it is published is not what it is
    assert config.resolved()["push_to_hub"] == {"repo": "me/data", "private": False}
    full = MINIMAL.replace(
        "output: out",
        "output:\n  path: out\n  push_to_hub: {repo: me/data, private: true, revision: v2}",
    )
    assert load_run_config(write(tmp_path, full)).push == PushSettings("me/data", True, "v2")
    err = error_of(
        tmp_path,
        MINIMAL.replace(
            "output: out", "output:\n  path: out\n  push_to_hub: {repo: me/x, privat: true}"
        ),
    )
    assert "did you mean 'private'" in err.reason and err.line == 6
    err = error_of(
        tmp_path, MINIMAL.replace("output: out", "output:\n  path: out\n  push_to_hub: no id")
    )
    assert err.line == 6 and err.reason == "'no id' is not a Hub repository id like ORG/NAME"


def _run_with_stages(tmp_path: Path, stages: str) -> tuple[Path, Result]:
    """`mms run` of a config reading `tmp_path` with the given `stages:` lines (line 6 on)."""
    config = tmp_path / "run.yaml"
    config.write_text(f"name: x\ninputs:\n  - path: {tmp_path}\noutput: out\nstages:\n{stages}")
    return config, CliRunner().invoke(main, ["run", str(config)])


def test_a_config_error_is_one_line_without_usage(tmp_path):
    """The command line was right; the config is not: `error: FILE: where: what (line N)`,
    exit 2, and none of click's `Usage:` / `Try ... --help` lines."""
    config, result = _run_with_stages(tmp_path, "  dedup: {enabled: maybe}\n")
    assert result.exit_code == 2
    assert "Usage:" not in result.output and "--help" not in result.output
    assert result.output.strip() == (
        f"error: {config}: stages.dedup.enabled: 'maybe' is not of type 'boolean' (line 6)"
    )


def test_a_tokenizer_hub_name_with_dots_is_looked_up_in_the_local_cache(tmp_path):
    _, result = _run_with_stages(tmp_path, "  tokenize: {tokenizer: meta-llama/Llama-3.2-1B}\n")
    assert result.exit_code == 2
    assert "meta-llama/Llama-3.2-1B is not in the local Hugging Face cache (looked in" in (
        " ".join(result.output.split())
    )
    assert "mms never downloads" in " ".join(result.output.split())


def test_per_source_ignores_name_known_rules(tmp_path):
    stages = "  lint:\n    per_source_ignores:\n      'legacy/*': [MMS105, MMS999]\n"
    _, result = _run_with_stages(tmp_path, stages)
    assert result.exit_code == 2
    assert (
        "stages.lint.per_source_ignores.legacy/*[1]" in result.output
        and "(line 8)" in result.output
    )
