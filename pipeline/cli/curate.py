"""`mms curate`: the curation stages on any input, written back as MMS JSONL."""

from __future__ import annotations

import dataclasses
import sys

import click

from pipeline import api
from pipeline.cli.options import (
    hf_config_option,
    input_format_option,
    media_options,
    overwrite_file_option,
    read_spec,
    reading_media,
    split_option,
    worker_count,
    workers_option,
)
from pipeline.cli.output import (
    ConfigProblem,
    Refusal,
    check_mark,
    exit_unbalanced,
    print_error,
    print_inputs,
    print_left_out,
    print_quarantine,
    read_progress,
    safe,
    stderr,
)
from pipeline.cli.writes import writes
from pipeline.config_file import ConfigFileError
from pipeline.engine import PartFailed
from pipeline.jobs.curate import CurateResult, load_curation_file
from pipeline.output.files import OutputPathError
from pipeline.sources import InputError
from pipeline.stages.contract import StageError
from pipeline.stages.curate.decontaminate import DecontaminateSettings
from pipeline.stages.curate.language import LanguageSettings
from pipeline.stages.curate.pii import PiiSettings
from pipeline.stages.curate.plugins import DEFAULT_TIMEOUT, PluginError, PluginSpec, load_plugin
from pipeline.stages.curate.quality import QualityStageSettings
from pipeline.stages.curate.settings import CurationSettings
from pipeline.wording import plural

DROP_MEANINGS = {
    "pii": "personal data or a secret in an assistant turn (pii.assistant: drop)",
    "contaminated": "holds an evaluation item's text (decontaminate)",
    "language_mixed": "written in several languages (language.drop_mixed)",
}


@writes(output="file")
@click.command(
    "curate",
    epilog="\b\nExamples:\n"
    "  mms curate raw/ -o curated.jsonl --redact-pii --languages en\n"
    "  mms curate chats.jsonl -o clean.jsonl --against evals/mt_bench_question.jsonl\n"
    "  mms curate chats.jsonl -o clean.jsonl --quality drop --plugin my_filters:no_urls\n"
    "  mms curate chats.jsonl -o clean.jsonl --config curation.yaml\n"
    "  mms curate big.jsonl --from sharegpt -o clean.jsonl --redact-pii --workers 4\n"
    "\b\ncuration.yaml holds the same slices as a pipeline config's `stages:` (pii,\n"
    "language, quality, decontaminate, plugins), at its top level or under `stages:`.",
)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="OUT",
    help="MMS JSONL file of the kept threads (.gz/.zst to compress; `-`: standard output). "
    "Beside it: OUT.rejected.jsonl (records that are no thread) and OUT.dropped.jsonl "
    "(threads a stage left out, with the stage and the reason).",
)
@overwrite_file_option
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="A YAML file of the curation stages' settings (see the epilog); the options below "
    "add to it.",
)
@click.option(
    "--redact-pii",
    is_flag=True,
    help="Redact e-mails, phone numbers, IPs, card numbers and secrets in platform, "
    "developer, user and context text (typed placeholders: <EMAIL_1>); tag them in "
    "assistant text.",
)
@click.option(
    "--languages",
    metavar="CODES",
    help="Keep only threads in these languages (ISO 639 codes, comma-separated: en,zh); "
    "every thread is tagged with its language in meta.language.",
)
@click.option(
    "--quality",
    type=click.Choice(["tag", "drop"]),
    help="Run the quality heuristics for chat (empty, repetitive, refusing, copying, "
    "mojibake, cut-off answers): tag them in meta.quality, or drop the thread.",
)
@click.option(
    "--against",
    multiple=True,
    metavar="PATH",
    help="An evaluation set (any input mms reads; repeat for more): threads holding one of "
    "its items' 13-grams are dropped (user turns against its prompts, assistant turns "
    "against its answers).",
)
@click.option(
    "--plugin",
    "plugins",
    multiple=True,
    metavar="MODULE:FUNCTION",
    help="A filter of your own (repeat for more): called with each thread, it returns None "
    "to keep it or a reason to drop it.",
)
@click.option(
    "--plugin-timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help=f"The seconds each plugin may take on one thread (default {DEFAULT_TIMEOUT:g}; the "
    "--config file's plugins too): one that takes longer stops the command with an error.",
)
@input_format_option("Input format of every input (default: detected per file).")
@split_option
@hf_config_option
@workers_option
@media_options
def curate_command(
    inputs: tuple[str, ...],
    output: str,
    overwrite: bool,
    config_file: str | None,
    redact_pii: bool,
    languages: str | None,
    quality: str | None,
    against: tuple[str, ...],
    plugins: tuple[str, ...],
    plugin_timeout: float | None,
    input_format: str,
    split: str,
    hf_config: str | None,
    workers: int | None,
    media_flags: dict[str, object],
) -> None:
    """Curate INPUT threads: redact personal data, keep chosen languages, flag or drop poor
    answers, remove threads that hold evaluation items, and run your own filters.

    Reads anything `mms convert` reads and writes the kept threads (redacted) as MMS JSONL;
    what each stage found is in the threads' meta (pii, language, quality, contamination,
    plugins). The summary counts what was tagged and dropped, and checks that records read
    = converted + quarantined and threads = written + dropped. With --workers, the parts
    are curated side by side and written in reading order: the same bytes for any N.
    Exit status: 0 done, 1 a plugin (or a stage) failed, 2 usage or config error.
    """
    try:
        settings = load_curation_file(config_file) if config_file else CurationSettings()
    except ConfigFileError as err:
        raise ConfigProblem(str(err)) from None
    settings = _with_options(settings, redact_pii, languages, quality, against, plugins)
    if plugin_timeout is not None:
        timed = tuple(dataclasses.replace(p, timeout=plugin_timeout) for p in settings.plugins)
        settings = dataclasses.replace(settings, plugins=timed)
    if not settings.redaction() and not settings.taggers():
        raise click.UsageError(
            "no curation stage: pass --config, --redact-pii, --languages, --quality, "
            "--against or --plugin"
        )
    spec = reading_media(read_spec(inputs, input_format, split, hf_config), media_flags, output)
    try:
        with read_progress() as update:
            result = api.curate(
                inputs,
                output,
                settings,
                spec=spec,
                progress=update,
                overwrite=overwrite,
                workers=worker_count(workers),
            )
    except OutputPathError as err:
        raise Refusal(str(err)) from None
    except InputError as err:
        raise click.UsageError(str(err)) from None
    except (PluginError, StageError, PartFailed) as err:
        print_error(err, "; nothing was written")
        sys.exit(1)
    _print_summary(result)
    if not result.account.balanced:
        exit_unbalanced()


def _with_options(
    settings: CurationSettings,
    redact_pii: bool,
    languages: str | None,
    quality: str | None,
    against: tuple[str, ...],
    plugins: tuple[str, ...],
) -> CurationSettings:
    """The settings with the command line's options added."""
    changes: dict[str, object] = {}
    if redact_pii and settings.pii is None:
        changes["pii"] = PiiSettings()
    if languages is not None:
        codes = tuple(code.strip() for code in languages.split(",") if code.strip())
        changes["language"] = LanguageSettings(languages=codes)
    if quality is not None:
        changes["quality"] = QualityStageSettings(action=quality)  # type: ignore[arg-type]
    if against:
        earlier = settings.decontaminate.against if settings.decontaminate else ()
        changes["decontaminate"] = DecontaminateSettings(against=(*earlier, *against))
    if plugins:
        try:
            for use in plugins:
                load_plugin(use)
        except PluginError as err:
            raise click.UsageError(str(err)) from None
        changes["plugins"] = (*settings.plugins, *(PluginSpec(use) for use in plugins))
    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]


def _meaning(code: str) -> str:
    """What a curation drop code means, for the summary."""
    stage, _, what = code.partition(":")
    if stage == "language" and what:
        return f"written in {what}, not a kept language"
    if stage == "quality":
        return f"an answer breaks the quality rule {what}"
    if stage == "plugin":
        return "a plugin's reason"
    return DROP_MEANINGS.get(code, "")


def _print_summary(result: CurateResult) -> None:
    stats = result.account
    print_inputs(stats)
    where = "standard output" if str(result.output) == "-" else safe(result.output)
    stderr.print(f"Wrote {plural(stats.kept, 'thread')} to {where}")
    for key, count in sorted(stats.tagged.items()):
        stderr.print(f"  {count:>8,}  tagged   {safe(key)}")
    meanings = {code: _meaning(code) for code in stats.dropped}
    print_left_out("Dropped", "threads", stats.dropped, result.dropped, meanings, width=24)
    print_quarantine(stats, result.quarantine)
    stderr.print(
        f"Check: {stats.records_read:,} read = {stats.records_converted:,} converted + "
        f"{stats.quarantined_total:,} quarantined; {stats.threads:,} threads = "
        f"{stats.kept:,} written + {stats.dropped_total:,} dropped {check_mark(stats.balanced)}"
    )
