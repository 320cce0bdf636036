"""Options more than one command takes, and the `ReadSpec` built from the read options,
so every command that reads inputs spells and checks them the same way."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

import click

from pipeline.formats import AUTO, FORMATS, ConvertOptions
from pipeline.jobs.read import ReadSpec
from pipeline.media import MEDIA_DIR, MediaRoot, MediaSettings
from pipeline.sources import DEFAULT_SPLIT, ReadLimits, is_hf_input
from pipeline.tokenize import LABEL_POLICIES
from pipeline.tokenize.overlong import OVERLONG_POLICIES

Decorator = Callable[[Callable[..., None]], Callable[..., None]]

split_option: Decorator = click.option(
    "--split",
    default=DEFAULT_SPLIT,
    show_default=True,
    metavar="NAME",
    help="Split of the hf: dataset inputs to stream (e.g. test, train_sft; train+test joins "
    "splits).",
)
hf_config_option: Decorator = click.option(
    "--hf-config",
    default=None,
    metavar="NAME",
    help="Config (subset) of the hf: dataset inputs, for datasets that have several (e.g. all).",
)

workers_option: Decorator = click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Processes reading the inputs in parallel [default: the number of CPUs]. Files "
    "are read side by side; a big uncompressed JSON Lines file is also split into parts of "
    "about 8 MiB when --from names a format that converts record by record (with auto, a "
    "file is one part, so one file is read by one process). The output (or report) is the "
    "same bytes for any N; 1 streams in this process.",
)

overwrite_option: Decorator = click.option(
    "--overwrite",
    is_flag=True,
    help="Write into a folder that holds files mms did not write (or that were changed "
    "since): mms then replaces and removes what is in its places there (data/, tokenizer/, "
    "quarantine/, reports/, media/, README.md, manifest.json) and says what; anything else "
    "in the folder is kept. Without it, mms writes only into an empty folder or its own "
    "output, and removes only files its earlier manifest lists, unchanged.",
)

overwrite_file_option: Decorator = click.option(
    "--overwrite",
    is_flag=True,
    help="Replace a file mms did not write (or that was changed since). Without it, mms "
    "replaces only a file it wrote itself (an earlier run of a command), and refuses "
    "anything else.",
)


def worker_count(given: int | None) -> int:
    """The --workers a command runs with: the number given, else one per CPU."""
    return given if given is not None else os.cpu_count() or 1


def input_format_option(help_text: str) -> Decorator:
    """`--from FORMAT` (auto-detection by default), shared by the commands that read inputs."""
    return click.option(
        "--from",
        "input_format",
        default=AUTO,
        show_default=True,
        type=click.Choice([AUTO, *FORMATS]),
        help=help_text,
    )


def overlong_option(help_text: str) -> Decorator:
    """`--overlong POLICY` (drop, truncate or error), shared by tokenize and pack."""
    return click.option(
        "--overlong",
        type=click.Choice(OVERLONG_POLICIES),
        default="drop",
        show_default=True,
        help=help_text,
    )


def train_on_option(help_text: str) -> Decorator:
    """`--train-on POLICY` (the labels policy), shared by the commands that render tokens."""
    return click.option(
        "--train-on",
        "policy",
        type=click.Choice(LABEL_POLICIES),
        default="assistant",
        show_default=True,
        help=help_text,
    )


def given(parameter: str) -> bool:
    """Whether the current command's `parameter` was given, not left at its default."""
    source = click.get_current_context().get_parameter_source(parameter)
    return source is not click.core.ParameterSource.DEFAULT


def _check_hf_options(inputs: tuple[str, ...], hf_config: str | None) -> None:
    """--split and --hf-config only steer hf: inputs: given without one, they are a mistake."""
    if (given("split") or hf_config is not None) and not any(is_hf_input(i) for i in inputs):
        raise click.UsageError(
            "--split and --hf-config apply to Hugging Face datasets only; "
            "name one as hf:ORG/NAME or hf:./local/dir"
        )


def read_spec(
    inputs: tuple[str, ...],
    input_format: str,
    split: str,
    hf_config: str | None,
    options: ConvertOptions | None = None,
    limits: ReadLimits | None = None,
) -> ReadSpec:
    """How a command reads INPUTS, from its --from, --split and --hf-config (checked
    against the inputs) and, for convert, its normalize options and limits. Media are not
    read (`mms convert`, `mms lint`, `mms curate` and `mms run` set `media` from their
    media options)."""
    _check_hf_options(inputs, hf_config)
    return ReadSpec(
        input_format,
        ConvertOptions() if options is None else options,
        ReadLimits() if limits is None else limits,
        split,
        hf_config,
    )


ROOTS_FLAG = "roots"
"""The media flag that holds the `--media-root` folders (a tuple, empty when none)."""


def media_options(command: Callable[..., None]) -> Callable[..., None]:
    """The media options (DESIGN §3) of `mms convert` and `mms run`, given to the
    command as `media_flags` (a dict of the flags given: None for a flag left out)."""
    options: list[Decorator] = [
        click.option(
            "--check-media/--no-check-media",
            "check_media",
            default=None,
            help="Read every media a kept thread refers to (a path inside its input file's "
            "folder, base64 data) and quarantine the record when one is missing "
            "(media_missing), outside the folder (media_outside_input), not the kind it "
            "claims (media_kind), undecodable (media_corrupt: a truncated image ...), too "
            "large (media_too_large) or unreadable (media_unreadable); each media's sha256 "
            "goes to meta.media_checked, and dedup compares media by it [default: on; a run: "
            "the config's stages.media.check].",
        ),
        click.option(
            "--copy-media",
            is_flag=True,
            default=None,
            help="Write each distinct media once into the output's media/ as <sha256>.<ext> "
            "and point the threads there (relative to the output); a run's manifest lists "
            "and hashes them [default: keep the references as the source wrote them; a run "
            "embeds each media's bytes in its shards].",
        ),
        click.option(
            "--fetch-media",
            is_flag=True,
            default=None,
            help="Also fetch media given as URLs (http(s) within --media-timeout; s3, gs, az, "
            "hf through the object stores), no more than --max-media-bytes each. Without it "
            "nothing is fetched from the network: URLs are kept unchecked, noted in "
            "meta.notes.",
        ),
        click.option(
            "--max-media-bytes",
            type=click.IntRange(min=1),
            default=None,
            metavar="N",
            help="Largest media file; a bigger one is quarantined as media_too_large "
            "[default: 64 MiB].",
        ),
        click.option(
            "--media-timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            metavar="SECONDS",
            help="How long fetching one media may take, whole (with --fetch-media; an object "
            "store's stalled request ends at its client's own timeout) [default: 30].",
        ),
        click.option(
            "--media-root",
            "media_roots",
            multiple=True,
            type=click.Path(exists=True, file_okay=False),
            metavar="DIR",
            help="A folder a media path not found beside its input file is looked for in "
            "(repeatable: in order; images kept apart from the JSON, like COCO's train2017/). "
            "The file must stay inside the folder it is found in (no .. or symlink out); "
            "the folder is recorded in its meta.media_checked entry (root) [a run: also each "
            "input's media_root].",
        ),
    ]

    def wrapped(**kwargs: object) -> None:
        flags = {
            "check": kwargs.pop("check_media"),
            "copy": kwargs.pop("copy_media"),
            "fetch": kwargs.pop("fetch_media"),
            "max_bytes": kwargs.pop("max_media_bytes"),
            "timeout": kwargs.pop("media_timeout"),
            ROOTS_FLAG: kwargs.pop("media_roots"),
        }
        command(media_flags=flags, **kwargs)

    wrapped.__name__ = command.__name__
    wrapped.__doc__ = command.__doc__
    decorated: Callable[..., None] = wrapped
    for option in reversed(options):
        decorated = option(decorated)
    return decorated


def embed_media_option(command: Callable[..., None]) -> Callable[..., None]:
    """`--embed-media/--no-embed-media` of the commands that write shards (`mms run`,
    `mms tokenize`), given as `embed_media` (None: left to the default or the config);
    placed above `media_options`, whose wrapper would hide an option placed below it."""
    option = click.option(
        "--embed-media/--no-embed-media",
        "embed_media",
        default=None,
        help="Put each media's bytes in the shards' images/audios/videos cells, so the "
        "output loads anywhere (datasets, TRL, the Hub) without its inputs' folders; "
        "--no-embed-media keeps only paths (with --copy-media, into the output's media/) "
        "[default: embed; a run: the config's stages.media.embed].",
    )
    return option(command)


def reading_media(spec: ReadSpec, flags: Mapping[str, object], output: str) -> ReadSpec:
    """`spec` reading media as a command that writes threads to `output` (a file, `-`:
    standard output) is asked by its media flags; copies go to media/ beside `output`."""
    media = media_settings(MediaSettings(), flags)
    if media.copy and output == "-":
        raise click.UsageError("--copy-media writes media/ beside the output: name a file (-o)")
    store = os.path.join(os.path.dirname(output), MEDIA_DIR) if media.copy else None
    return dataclasses.replace(spec, media=media, media_store=store, media_roots=media_roots(flags))


def media_settings(base: MediaSettings, flags: Mapping[str, object]) -> MediaSettings:
    """`base` with the media flags given on the command line (`--media-root` aside:
    `media_roots`)."""
    given: dict[str, Any] = {
        name: value for name, value in flags.items() if value is not None and name != ROOTS_FLAG
    }
    return dataclasses.replace(base, **given) if given else base


def media_roots(flags: Mapping[str, object]) -> tuple[MediaRoot, ...]:
    """The `--media-root` folders, in order, recorded as written."""
    given = flags.get(ROOTS_FLAG) or ()
    assert isinstance(given, tuple)
    return tuple(MediaRoot.given(str(path)) for path in given)
