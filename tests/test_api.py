"""The Python API (`pipeline.api`): every command that does work has its function, the CLI
calls it, and a batch job in Python gets the CLI's bytes and counts from it."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect

import polars as pl
import pytest
import yaml
from click.testing import CliRunner

import pipeline
from pipeline import api
from pipeline.cli import COMMANDS, main
from pipeline.config_file import ConfigFileError
from pipeline.jobs.run.job import RunResult
from tests.conftest import REPO
from tests.test_run import output_files

QUICKSTART = REPO / "configs" / "quickstart.yaml"
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
SAMPLES = REPO / "data_samples"
REFERENCES = {"inspect", "formats", "rules"}
"""Commands that show what the tool knows rather than do work on data."""


def _called_api_functions(module_name: str) -> set[str]:
    """The `api.NAME(...)` calls in a CLI module's source."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module_name)))
    return {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "api"
    }


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - REFERENCES))
def test_every_working_command_is_a_documented_function_the_cli_calls(command):
    function = getattr(api, command)
    signature = inspect.signature(function)
    assert function.__doc__ and f"`mms {command}`" in function.__doc__
    assert all(p.annotation is not inspect.Parameter.empty for p in signature.parameters.values())
    assert signature.return_annotation is not inspect.Signature.empty
    module = COMMANDS[command].split(":")[0]
    assert command in _called_api_functions(module), f"{module} does not call api.{command}"


def test_the_top_level_names_are_the_api_functions():
    for name in ("run", "convert", "curate", "pack", "stats", "verify", "push", "export"):
        assert getattr(pipeline, name) is getattr(api, name)
        assert name in pipeline.__all__


def test_a_run_from_python_writes_the_bytes_the_cli_writes(tmp_path):
    cli_out, api_out, dict_out = (tmp_path / way / "out" for way in ("cli", "api", "dict"))
    result = CliRunner().invoke(main, ["run", str(QUICKSTART), "-o", str(cli_out)])
    assert result.exit_code == 0, result.output
    from_file = api.run(QUICKSTART, output=api_out)
    assert isinstance(from_file, RunResult) and not from_file.gate_failed
    assert from_file.verification is not None and from_file.verification.passed
    data = yaml.safe_load(QUICKSTART.read_text())
    data["stages"]["tokenize"]["tokenizer"] = str(SAMPLE_TOKENIZER)
    for entry in data["inputs"]:  # a mapping's relative paths read against the working folder
        entry["path"] = str((QUICKSTART.parent / entry["path"]).resolve())
    from_dict = api.run(data, output=dict_out)
    assert isinstance(from_dict, RunResult)
    assert output_files(api_out) == output_files(cli_out)
    shards = {name: data for name, data in output_files(dict_out).items() if "data/" in name}
    assert shards == {n: d for n, d in output_files(cli_out).items() if "data/" in n}


def test_a_config_given_as_data_resolves_its_paths_against_base(tmp_path):
    data = yaml.safe_load(QUICKSTART.read_text())
    config = api.run_config(data, base=QUICKSTART.parent)
    assert config.source == QUICKSTART.parent / "<config>"  # no file: paths record from base
    assert dataclasses.replace(config, source=QUICKSTART) == api.run_config(QUICKSTART)
    with pytest.raises(ConfigFileError, match="stagez"):
        api.run_config({**data, "stagez": {}}, base=QUICKSTART.parent)
    with pytest.raises(ValueError, match="ray engine"):
        api.run_config(QUICKSTART, ray_address="auto")


def test_tokenize_pack_verify_stats_from_python(tmp_path):
    tokenized = api.tokenize(SAMPLES / "mms", tmp_path / "tok", SAMPLE_TOKENIZER)
    assert tokenized.balanced and tokenized.account.kept > 0
    packed = api.pack(tmp_path / "tok", tmp_path / "packed", seq_len=512)
    assert sum(len(shards) for shards in packed.shards.values()) >= 1
    for out in ("tok", "packed"):
        assert api.verify(tmp_path / out).passed
    frame = api.rows(tmp_path / "tok").collect()
    assert frame.height == tokenized.account.kept and "input_ids" in frame.columns
    assert api.rows(tmp_path / "packed", "train").collect().height == sum(
        shard.rows for shard in packed.shards["train"]
    )
    with pytest.raises(ValueError, match="no split 'nope'"):
        api.rows(tmp_path / "tok", "nope")
    figures = api.stats(tmp_path / "tok")
    assert isinstance(figures.splits, pl.DataFrame)
    assert figures.splits["threads"].sum() == tokenized.account.kept
    assert figures.roles["tokens"].sum() == figures.splits["tokens"].sum()
    with pytest.raises(ValueError, match="final turn"):
        api.tokenize(
            SAMPLES / "mms",
            tmp_path / "pairs",
            SAMPLE_TOKENIZER,
            objective="preference",
            train_on="assistant",
        )


def test_convert_curate_lint_export_from_python(tmp_path):
    converted = api.convert(SAMPLES / "openai", tmp_path / "threads.jsonl")
    assert converted.account.balanced and converted.account.kept > 0
    settings = tmp_path / "curation.yaml"
    settings.write_text("pii: {assistant: redact}\n")
    curated = api.curate(tmp_path / "threads.jsonl", tmp_path / "curated.jsonl", settings)
    assert curated.account.balanced
    kept = api.threads(tmp_path / "curated.jsonl")
    assert kept.height == curated.account.kept and kept["id"].n_unique() == kept.height
    report = api.lint(tmp_path / "curated.jsonl")
    assert report.stats.threads == curated.account.kept
    exported = api.export(tmp_path / "curated.jsonl", tmp_path / "harmony.jsonl")
    assert exported.account.balanced and (tmp_path / "harmony.jsonl").stat().st_size > 0
