"""Every `mms` command as a typed Python function: what a batch job in a notebook or a
scheduler calls. The CLI is a layer over these (it parses flags, shows progress and turns
errors into exit codes); each function takes the same settings as keywords, with the same
defaults, and returns the result object whose counts the command prints.

    >>> from pipeline import api as mms
    >>> result = mms.run("configs/quickstart.yaml", output="out")  # doctest: +SKIP
    >>> mms.verify("out").passed  # doctest: +SKIP
    True

`run`, `convert`, `curate`, `pack`, `stats`, `verify`, `push` and `export` are also
`pipeline.<name>`; `tokenize` and `lint` are here only (`pipeline.tokenize` and
`pipeline.lint` are packages).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import polars as pl

    from pipeline.accounting import Account
    from pipeline.jobs.convert import ConvertResult
    from pipeline.jobs.curate import CurateResult
    from pipeline.jobs.export import ExportResult
    from pipeline.jobs.pack import PackResult
    from pipeline.jobs.push import PushResult
    from pipeline.jobs.read import ReadSpec
    from pipeline.jobs.run.config import RunConfig
    from pipeline.jobs.run.job import FinishedBefore, RunResult
    from pipeline.jobs.run.phases import Progress
    from pipeline.jobs.tokenize import TokenizeResult
    from pipeline.jobs.verify import Verification
    from pipeline.lint import LintConfig, LintReport
    from pipeline.stages.curate.settings import CurationSettings
    from pipeline.tokenize import LoadedTokenizer
    from pipeline.tokenize.overlong import OverlongPolicy
    from pipeline.tokenize.renderer import LabelPolicy

PathLike = str | Path
Inputs = PathLike | Sequence[PathLike]
Objective = Literal["sft", "preference", "unpaired_preference", "prompt"]


def run_config(
    config: PathLike | Mapping[str, Any] | RunConfig,
    *,
    engine: Literal["local", "ray"] | None = None,
    ray_address: str | None = None,
    media_roots: Sequence[PathLike] = (),
    base: PathLike = ".",
) -> RunConfig:
    """The checked run config of `config`: a YAML file's path, its content as a mapping
    (relative paths resolved against `base`), or a RunConfig; with the engine and media
    roots given here (added after each input's own `media_root`). Raises ConfigFileError
    (a file) or ValueError with what is wrong and where."""
    from pipeline.jobs.run.config import RunConfig, load_run_config, run_config_from_data

    if isinstance(config, RunConfig):
        checked = config
    elif isinstance(config, Mapping):
        checked = run_config_from_data(config, base)
    else:
        checked = load_run_config(config)
    checked = _with_engine(checked, engine, ray_address)
    roots = tuple(os.path.abspath(root) for root in media_roots)
    if roots:
        inputs = tuple(
            dataclasses.replace(spec, media_root=spec.media_root + roots) for spec in checked.inputs
        )
        checked = dataclasses.replace(checked, inputs=inputs)
    return checked


def run(
    config: PathLike | Mapping[str, Any] | RunConfig,
    *,
    output: PathLike | None = None,
    engine: Literal["local", "ray"] | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
    media_roots: Sequence[PathLike] = (),
    fresh: bool = False,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> RunResult | FinishedBefore:
    """`mms run`: every stage of `config` (see `run_config`) into `output` (default: the
    config's; a local folder or an `s3://...` prefix). An interrupted run resumes part by
    part unless `fresh`; a finished output of the same config and inputs is left as it
    is (FinishedBefore). Raises on a config or input error, and PartFailed, StorageError
    or RunFault when the run stops part-way (run it again to resume)."""
    from pipeline.jobs.run import run_pipeline

    checked = run_config(config, engine=engine, ray_address=ray_address, media_roots=media_roots)
    return run_pipeline(
        checked,
        output=output,
        workers=workers,
        progress=progress,
        fresh=fresh,
        overwrite=overwrite,
    )


def convert(
    inputs: Inputs,
    output: PathLike,
    spec: ReadSpec | None = None,
    *,
    input_format: str = "auto",
    quarantine: PathLike | None = None,
    workers: int = 1,
    overwrite: bool = False,
    progress: Callable[[Account], None] | None = None,
) -> ConvertResult:
    """`mms convert`: `inputs` (files, folders, globs, `hf:` datasets) to MMS JSON Lines
    at `output` (`-`: standard output), rejected records to `quarantine` (default: beside
    it). `spec` gives every reading option; `input_format` alone is the common case."""
    from pipeline.jobs.convert import convert as convert_job

    return convert_job(
        _paths(inputs),
        output,
        _spec(spec, input_format),
        quarantine=quarantine,
        workers=workers,
        overwrite=overwrite,
        progress=progress,
    )


def curate(
    inputs: Inputs,
    output: PathLike,
    settings: PathLike | CurationSettings,
    *,
    input_format: str = "auto",
    workers: int = 1,
    overwrite: bool = False,
    spec: ReadSpec | None = None,
    progress: Callable[[Account], None] | None = None,
) -> CurateResult:
    """`mms curate`: the curation stages of `settings` (a curation YAML file or
    CurationSettings) on every thread of `inputs`; the kept threads to `output` (MMS JSON
    Lines), the dropped ones listed beside it with their reasons."""
    from pipeline.jobs.curate import curate as curate_job
    from pipeline.jobs.curate import load_curation_file
    from pipeline.stages.curate.settings import CurationSettings

    if not isinstance(settings, CurationSettings):
        settings = load_curation_file(settings)
    return curate_job(
        _paths(inputs),
        output,
        settings,
        _spec(spec, input_format),
        workers=workers,
        overwrite=overwrite,
        progress=progress,
    )


def lint(
    inputs: Inputs,
    *,
    input_format: str = "auto",
    config: LintConfig | None = None,
    workers: int = 1,
    spec: ReadSpec | None = None,
    progress: Callable[[Account, LintReport], None] | None = None,
    report_file: PathLike | None = None,
) -> LintReport:
    """`mms lint`: every rule on the threads of `inputs`; the report holds the findings
    with their file and position (`report.diagnostics`) and the counts by code."""
    from pipeline.jobs.lint import lint as lint_job

    return lint_job(
        _paths(inputs),
        _spec(spec, input_format),
        config=config,
        workers=workers,
        progress=progress,
        outputs=[report_file] if report_file is not None else [],
    )


def tokenize(
    inputs: Inputs,
    output: PathLike,
    tokenizer: PathLike | LoadedTokenizer,
    *,
    input_format: str = "auto",
    objective: Objective = "sft",
    train_on: LabelPolicy | None = None,
    bos: bool = False,
    max_tokens: int | None = None,
    overlong: OverlongPolicy = "drop",
    references: Sequence[PathLike] | Mapping[str, Any] = (),
    encoder: Literal["auto", "tokenizers"] = "auto",
    shard_rows: int | None = None,
    overwrite: bool = False,
    spec: ReadSpec | None = None,
    progress: Callable[[Account], None] | None = None,
) -> TokenizeResult:
    """`mms tokenize`: the threads of `inputs` rendered with the MMS special tokens into
    Parquet rows with their labels, under `output` with the shipped tokenizer. `tokenizer`
    is a tokenizer.json, a folder with one, or a cached Hub name (`encoder="tokenizers"`
    keeps the `tokenizers` encoder where tiktoken would do). An objective other than
    `sft` trains the final turn only (`train_on` last_assistant, its default) and never
    truncates its completion; `references` (prompt rows) are answers by thread id, or
    files of them. Raises ValueError for settings that do not go together, and
    TokenizerLoadError (a ValueError) for a tokenizer that cannot load or serve."""
    from pipeline.jobs.tokenize import tokenize_dataset
    from pipeline.objectives.references import load_references
    from pipeline.output.shards import SHARD_ROWS
    from pipeline.tokenize import LoadedTokenizer, Renderer, TokenizerLoadError, load_tokenizer

    if references and objective != "prompt":
        raise ValueError("references go with the prompt objective")
    if overlong != "drop" and max_tokens is None:
        raise ValueError("an overlong policy applies only with max_tokens")
    if objective != "sft":
        if train_on not in (None, "last_assistant"):
            raise ValueError(f"the {objective} objective trains the final turn only")
        if max_tokens is not None and overlong == "truncate":
            raise ValueError(f"truncating cuts the final turn a {objective} row is made of")
    policy: LabelPolicy = train_on or ("assistant" if objective == "sft" else "last_assistant")
    if not isinstance(tokenizer, LoadedTokenizer):
        tokenizer = load_tokenizer(tokenizer, allow_tiktoken=encoder == "auto")
    try:  # the tokenizer suits MMS, has the BOS asked for, and ships as a file trainers load
        Renderer(tokenizer, bos=bos, policy=policy).check_shipped_tokenizer()
    except ValueError as err:
        raise TokenizerLoadError(str(err)) from None
    if isinstance(references, Mapping):
        answers = dict(references)
    else:
        answers = load_references(list(references)) if references else {}
    return tokenize_dataset(
        _paths(inputs),
        output,
        tokenizer,
        _spec(spec, input_format),
        bos=bos,
        policy=policy,
        objective=objective,
        references=answers or None,
        max_tokens=max_tokens,
        overlong=overlong,
        shard_rows=shard_rows or SHARD_ROWS,
        progress=progress,
        overwrite=overwrite,
    )


def pack(
    source: PathLike,
    output: PathLike,
    *,
    seq_len: int,
    overlong: OverlongPolicy = "drop",
    window: int | None = None,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
) -> PackResult:
    """`mms pack`: the rows of the tokenized output `source` packed into rows of at most
    `seq_len` tokens under `output`, each thread once with its ids and labels unchanged;
    `window`: how many threads best-fit chooses among (default: the command's). `progress`
    is told the threads read so far."""
    from pipeline.jobs.pack import pack_output
    from pipeline.packing import WINDOW

    return pack_output(
        source,
        output,
        seq_len=seq_len,
        overlong=overlong,
        window=window or WINDOW,
        overwrite=overwrite,
        progress=progress,
    )


@dataclass(frozen=True)
class Stats:
    """`mms stats`'s figures: `figures` as its JSON holds them (schemas/stats.schema.json),
    and the per-split scalars as a polars frame, one row per split."""

    figures: dict[str, Any]

    @property
    def splits(self) -> pl.DataFrame:
        """One row per split: threads, messages, tokens, trained tokens, lengths ..."""
        import polars as pl

        rows = [
            {"split": split, **{k: v for k, v in values.items() if not isinstance(v, dict)}}
            for split, values in self.figures["splits"].items()
        ]
        return pl.DataFrame(rows)

    @property
    def roles(self) -> pl.DataFrame:
        """One row per split and role: messages, tokens, trained tokens and the role's
        share of the split's tokens (no rows when the rows are not tokenized)."""
        import polars as pl

        rows = [
            {"split": split, "role": role, **figures}
            for split, values in self.figures["splits"].items()
            for role, figures in (values.get("roles") or {}).items()
        ]
        schema = {
            "split": pl.String,
            "role": pl.String,
            "messages": pl.Int64,
            "tokens": pl.Int64,
            "trained_tokens": pl.Int64,
            "token_share": pl.Float64,
        }
        return pl.DataFrame(rows, schema=schema)

    @property
    def run(self) -> dict[str, Any] | None:
        """A run's accounting (quarantined, duplicates, drops ...), for one run's folder."""
        return self.figures.get("run")


def stats(*targets: PathLike, by: str | None = None) -> Stats:
    """`mms stats`: the figures of output folders or Parquet files (`hf:ORG/NAME` too),
    per split and, with `by`, per value of that meta field."""
    from pipeline.jobs.stats import output_stats

    if not targets:
        raise ValueError("stats needs an output folder or a Parquet file")
    return Stats(output_stats([str(target) for target in targets], by))


def rows(output: PathLike, split: str | None = None) -> pl.LazyFrame:
    """The rows of an output (`mms run`, `tokenize` or `pack`) as a polars LazyFrame over
    its Parquet shards, every split or only `split`: nothing is read until collected.

        >>> mms.rows("out", "train").select("id", "num_tokens").collect()  # doctest: +SKIP
    """
    import polars as pl

    from pipeline.jobs.stats.files import shard_files

    files = shard_files([output])
    if split is not None and split not in files:
        raise ValueError(f"{output} has no split {split!r}: it has {', '.join(sorted(files))}")
    chosen = files[split] if split is not None else [p for paths in files.values() for p in paths]
    return pl.scan_parquet(chosen)


def threads(inputs: Inputs, *, input_format: str = "auto") -> pl.DataFrame:
    """The threads of `inputs` (an `mms convert` or `mms curate` output, or any input a
    command reads) as a polars frame, one row per thread in the thread's Arrow form
    (`messages` a list of structs, `meta` JSON text); records that are not threads are
    left out, as `convert` quarantines them."""
    import polars as pl

    from pipeline.jobs.read import read
    from pipeline.mms import threads_to_arrow

    frame = pl.from_arrow(threads_to_arrow(read(_paths(inputs), _spec(None, input_format))))
    assert isinstance(frame, pl.DataFrame)  # a table gives a frame
    return frame


def verify(
    output: PathLike,
    *,
    render: bool = True,
    template: bool = True,
    source: PathLike | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> Verification:
    """`mms verify`: every file of an output against its manifest, and (`render`,
    `template`) every row rendered again from its messages and through the shipped chat
    template. `result.passed` says whether everything held; `result.problems` what did
    not. A packed output's threads are checked on the rows it was packed from: `source`,
    else the output its manifest names beside it. `progress` is told each check and its
    rows so far."""
    from pipeline.jobs.verify import verify_output

    return verify_output(output, render=render, template=template, source=source, progress=progress)


def push(
    output: PathLike,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    create_pr: bool = False,
    message: str | None = None,
    dry_run: bool = False,
    token: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PushResult:
    """`mms push`: a verified output folder to the Hub dataset repository `repo_id`, its
    card rewritten to load from there; `dry_run` only says what would be sent. `token`
    defaults to HF_TOKEN or the cached login; `progress` is told the commits done of all."""
    from pipeline.jobs.push import push_output

    return push_output(
        output,
        repo_id,
        token=token,
        private=private,
        revision=revision,
        create_pr=create_pr,
        message=message,
        dry_run=dry_run,
        progress=progress,
    )


def export(
    inputs: Inputs,
    output: PathLike,
    *,
    to: str = "harmony",
    input_format: str = "auto",
    quarantine: PathLike | None = None,
    overwrite: bool = False,
) -> ExportResult:
    """`mms export`: the threads of `inputs` written in another format (`harmony`) at
    `output`: a `.jsonl` file, `-`, or a folder of one `.txt` transcript per thread."""
    from pipeline.jobs.export import export as export_job

    return export_job(
        _paths(inputs),
        output,
        _spec(None, input_format),
        to=to,
        quarantine=quarantine,
        overwrite=overwrite,
    )


def _paths(inputs: Inputs) -> list[str]:
    if isinstance(inputs, (str, os.PathLike)):
        return [os.fspath(inputs)]
    return [os.fspath(one) for one in inputs]


def _spec(spec: ReadSpec | None, input_format: str) -> ReadSpec:
    from pipeline.jobs.read import ReadSpec

    if spec is not None:
        if input_format != "auto" and spec.format != input_format:
            raise ValueError("give the input format in `spec` or `input_format`, not both")
        return spec
    return ReadSpec(input_format)


def _with_engine(config: RunConfig, engine: str | None, address: str | None) -> RunConfig:
    """The config with the engine named here (the config's when None)."""
    if address is not None and (engine or config.engine.kind) != "ray":
        raise ValueError("a Ray address applies only with the ray engine")
    changes: dict[str, Any] = {}
    if engine is not None:
        changes["kind"] = engine
    if address is not None:
        changes["address"] = address
    if engine == "local":
        changes.update(address=None, num_cpus=None)
    if not changes:
        return config
    return dataclasses.replace(config, engine=dataclasses.replace(config.engine, **changes))
