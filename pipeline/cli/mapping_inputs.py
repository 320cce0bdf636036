"""`--mapping FILE` and `--dataset-info FILE` of `mms convert`: inputs read by the `mapped`
format, with one mapping for all (a mapping file) or one per dataset (a LLaMA-Factory
registry, whose dataset names take the place of INPUT)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from pipeline.cli.output import safe, stderr
from pipeline.config_file import ConfigFileError
from pipeline.formats import AUTO
from pipeline.formats.field_mapping import FieldMapping, FileMappings
from pipeline.formats.mapped import NAME as MAPPED
from pipeline.jobs.mappings import (
    HUB_ONLY,
    RegistryError,
    load_mapping_file,
    read_dataset_info,
)
from pipeline.wording import plural

F = TypeVar("F", bound=Callable[..., Any])


def mapping_options(command: F) -> F:
    """The two options, in the order --help lists them."""
    command = click.option(
        "--dataset-info",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        metavar="FILE",
        help="A LLaMA-Factory dataset_info.json: convert the datasets it names (INPUT "
        "arguments are then dataset names; none: every dataset with a local file), each "
        "read with its formatting, columns and tags. Hub entries (hf_hub_url) are read "
        "through hf: when named.",
    )(command)
    return click.option(
        "--mapping",
        "mapping_file",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        metavar="FILE",
        help="A field mapping (YAML or JSON) for records with renamed keys: messages, role, "
        "content, roles, system, tools, chosen, rejected, weight, ... (the keys of a "
        "config's inputs[].mapping; LLaMA-Factory columns/tags and axolotl's "
        "field_messages/message_property_mappings are understood too). Implies --from "
        "mapped.",
    )(command)


@dataclass(frozen=True, slots=True)
class MappedInputs:
    """What to read and how: the inputs, the format, the mapping(s), and the split and
    subset of Hub datasets."""

    inputs: tuple[str, ...]
    input_format: str
    mapping: FieldMapping | FileMappings | None
    split: str
    hf_config: str | None


def mapped_inputs(
    inputs: tuple[str, ...],
    input_format: str,
    mapping_file: str | None,
    dataset_info: str | None,
    split: str,
    hf_config: str | None,
) -> MappedInputs:
    """The inputs as the options say (unchanged without either option). Raises
    click.UsageError for a conflict or a file that cannot be used."""
    if mapping_file and dataset_info:
        raise click.UsageError("--mapping and --dataset-info exclude each other")
    if (mapping_file or dataset_info) and input_format not in (AUTO, MAPPED):
        raise click.UsageError(
            f"--mapping and --dataset-info read --from {MAPPED}, not {input_format}"
        )
    if mapping_file:
        try:
            mapping = load_mapping_file(mapping_file)
        except ConfigFileError as err:
            raise click.UsageError(str(err)) from None
        return MappedInputs(inputs, MAPPED, mapping, split, hf_config)
    if dataset_info:
        return _registry_inputs(dataset_info, inputs, split, hf_config)
    if input_format == MAPPED:
        raise click.UsageError(f"--from {MAPPED} needs --mapping FILE or --dataset-info FILE")
    if not inputs:
        raise click.UsageError("Missing argument 'INPUT...'.")
    return MappedInputs(inputs, input_format, None, split, hf_config)


def _registry_inputs(
    path: str, names: tuple[str, ...], split: str, hf_config: str | None
) -> MappedInputs:
    try:
        registry = read_dataset_info(path, names)
        hub = registry.hub_split()
    except RegistryError as err:
        raise click.UsageError(str(err)) from None
    hub_only = [name for name, why in registry.skipped if why == HUB_ONLY]
    for name, why in registry.skipped:
        if why != HUB_ONLY:
            stderr.print(f"[yellow]skipped[/] {safe(name)}: {safe(why)}", highlight=False)
    if hub_only:
        stderr.print(
            f"{plural(len(hub_only), 'Hub dataset')} of {safe(path)} not read: name them to stream "
            "them through hf:",
            highlight=False,
        )
    if not registry.datasets:
        raise click.UsageError(f"{path}: no dataset to read")
    if hub is not None:
        split, hf_config = hub
    return MappedInputs(registry.inputs(), MAPPED, registry.mappings(), split, hf_config)
