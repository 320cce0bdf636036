"""The `mms run` pipeline config: a YAML file checked against
schemas/pipeline-config.schema.json and then for what a schema cannot say (split fractions
summing to 1, known formats and lint rules, a tokenizer a part can load, an output
folder apart from the inputs), read into frozen dataclasses with every default filled.

Relative paths in the config (input paths and globs, `hf:./dir` datasets, the tokenizer,
`output`) are resolved against the directory of the CONFIG FILE, never the working
directory, so a config means the same files wherever `mms run` is started (a URL,
`s3://bucket/prefix`, stays as written). Input paths are
not checked here (the run reports what it cannot read); the tokenizer is.

Every problem is a RunConfigError naming the file, the key path, what is wrong and the
line of the YAML it comes from. The YAML is read only by the data-only safe loader of
pipeline.sources.yaml_text: no tag ever constructs an object.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from pipeline import storage
from pipeline.config_file import ConfigFileError as RunConfigError
from pipeline.config_file import PathPart, YamlDocument, check_schema, parse_yaml
from pipeline.config_slice import OMITTED
from pipeline.formats import AUTO, FORMATS
from pipeline.formats.field_mapping import FieldMapping, MappingError, mapping_from_data
from pipeline.formats.mapped import NAME as MAPPED
from pipeline.jobs.run.stages import CONFIG_SLICES, Stages
from pipeline.media import MediaRoot
from pipeline.schemas import validator
from pipeline.sources.paths import HF_PREFIX, is_hf_input

SCHEMA = "pipeline-config"
RESOLVED_ORDER = (
    "normalize",
    "lint",
    "filters",
    "dedup",
    "tokenize",
    "shard",
    "pack",
    "pii",
    "language",
    "decontaminate",
    "quality",
    "plugins",
)
"""The order of the stages' slices in the resolved config, which manifests have recorded
since before the stage registry (pipeline/jobs/run/stages.py): a slice added since follows
them, in run order, so that no existing output's manifest changes."""
DEFAULT_HF_SPLIT = "train"
_LOCAL_PREFIXES = (".", "/", "~")


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One input: a path, glob or `hf:` dataset (absolute), its format, mixing and card data.
    `split` and `hf_config` are set for `hf:` inputs only."""

    path: str
    format: str = AUTO
    mapping: FieldMapping | None = None
    """What the `mapped` format reads where (`format` is then `mapped`)."""
    split: str | None = None
    hf_config: str | None = None
    sample: float = 1.0
    weight: int = 1
    license: str | None = None
    tags: tuple[str, ...] = ()
    language: tuple[str, ...] = ()
    """The languages of the input's text (ISO 639 codes), for the card; none: not known."""
    media_root: tuple[str, ...] = ()
    """Folders (absolute) a media path not beside its input file is looked for in, in
    order; recorded only when there are some, so other manifests keep their bytes."""

    @property
    def is_hf(self) -> bool:
        """Whether the input is a Hugging Face dataset (`hf:ORG/NAME` or `hf:/abs/dir`)."""
        return is_hf_input(self.path)


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Where the stages run and how many parts at once (the output depends on neither):
    `local` processes (`workers`, default 2), or `ray` (`address`: none or `local` starts
    Ray here with `num_cpus`, `auto` or `ray://host:port` joins a cluster; `workers`
    defaults to the cluster's CPUs)."""

    kind: Literal["local", "ray"] = "local"
    workers: int | None = None
    address: str | None = None
    num_cpus: int | None = None
    partition: Literal["auto", "always", "never"] | None = None
    """Whether dedup and lint's duplicate rule find shared keys in a partition pass before
    the dataset side (memory bounded by a part's keys, not the dataset's): `auto` (None)
    on Ray, and locally when the inputs hold PARTITION_BYTES or more."""

    def to_plain(self) -> dict[str, Any]:
        """The settings given (for the manifest), without the unset ones."""
        return {name: value for name, value in _plain(self).items() if value is not None}


@dataclass(frozen=True, slots=True)
class PushSettings:
    """Where a run publishes its output once it succeeds and its gate passes (`mms push`):
    the Hub dataset repository, whether a new one is private, and the branch."""

    repo: str
    private: bool = False
    revision: str | None = None

    def to_plain(self) -> dict[str, Any]:
        return {name: value for name, value in _plain(self).items() if value is not None}


@dataclass(frozen=True, slots=True)
class RunConfig:
    """A loaded pipeline config; `source` is the config file it came from."""

    name: str
    inputs: tuple[InputSpec, ...]
    output: Path | storage.StoredPath
    stages: Stages = field(default_factory=Stages)
    engine: EngineConfig = field(default_factory=EngineConfig)
    push: PushSettings | None = None
    source: Path | None = None
    written_absolute: frozenset[str] = frozenset()
    """The local paths the config file writes as absolute paths (resolved): outputs record
    them, and the files under them, as written, never relative to the config's folder."""

    def resolved(self) -> dict[str, Any]:
        """The config as plain JSON data, every default filled, local paths as
        `recorded_path` gives them (so the manifest and its config digest do not depend on
        where the checkout lives)."""
        return {
            "name": self.name,
            "inputs": [self._input_resolved(spec) for spec in self.inputs],
            "stages": self._stages_resolved(),
            "output": self.recorded_path(self.output),
            "engine": self.engine.to_plain(),
            **({"push_to_hub": self.push.to_plain()} if self.push else {}),
        }

    def _input_resolved(self, spec: InputSpec) -> dict[str, Any]:
        plain = {**_input_plain(spec), "path": self.recorded_path(spec.path)}
        if spec.media_root:
            plain["media_root"] = [self.recorded_path(root) for root in spec.media_root]
        return plain

    def media_roots(self, spec: InputSpec) -> tuple[MediaRoot, ...]:
        """An input's media roots, each recorded as the config writes it."""
        return tuple(MediaRoot(root, self.recorded_path(root)) for root in spec.media_root)

    def _stages_resolved(self) -> dict[str, Any]:
        """Each stage's slice as its declaration (pipeline/stages/) records it, in the order
        of RESOLVED_ORDER, then the slices not in it in run order."""
        order = {key: index for index, key in enumerate(RESOLVED_ORDER)}
        slices = sorted(CONFIG_SLICES, key=lambda config: order.get(config.key, len(order)))
        resolved = {}
        for config in slices:
            value = config.resolve(getattr(self.stages, config.key), self.recorded_path)
            if value is not OMITTED:
                resolved[config.key] = value
        return resolved

    def recorded_path(self, path: str | os.PathLike[str]) -> str:
        """How outputs record a local path: as the config writes it. A path written
        relative (to the config file's folder) stays relative to it, so the same config and
        data give the same bytes wherever the checkout lives; a path written absolute (and
        a file under it) stays absolute, so the config gives the same bytes wherever it
        lives; a local `hf:` dataset likewise (`hf:./dir` when relative). Hub names and the
        paths of a config with no file stay as given."""
        text = str(path)
        dataset = text.removeprefix(HF_PREFIX)
        if dataset != text:
            local = os.path.isabs(dataset)  # else a Hub name
            return HF_PREFIX + _relative_dataset(self.recorded_path(dataset)) if local else text
        if self.source is None or not os.path.isabs(text):
            return text
        if any(_under(text, written) for written in self.written_absolute):
            return text
        try:
            return os.path.relpath(text, self.source.parent)
        except ValueError:  # on another drive (Windows): no relative path exists
            return text

    @property
    def recorded_source(self) -> str | None:
        """The config file as outputs record it (`recorded_path`), None without one: where
        lint findings on the config point."""
        return self.recorded_path(self.source) if self.source else None

    def digest(self) -> str:
        """sha256 of the canonical JSON of resolved() (sorted keys, no spaces), for the
        manifest; the engine is left out, as the output does not depend on it (a run
        stopped on one engine resumes on another)."""
        resolved = self.resolved()
        del resolved["engine"]
        resolved.pop("push_to_hub", None)  # where the output is published, not what it is
        text = json.dumps(resolved, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _relative_dataset(path: str) -> str:
    """A dataset path as `hf:` reads it: a relative one starts with `./` or `../` (else it
    would name a Hub dataset)."""
    if os.path.isabs(path) or path.startswith(("./", "../")):
        return path
    return f"./{path}"


def _local_input(spec: InputSpec) -> str | None:
    """The local path (or glob) an input reads, None for a Hub dataset."""
    path = spec.path.removeprefix(HF_PREFIX) if spec.is_hf else spec.path
    return path if os.path.isabs(path) else None


def _under(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies under it."""
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # different drives (Windows)
        return False


def _plain(part: Any) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(part).items()}


def _input_plain(spec: InputSpec) -> dict[str, Any]:
    """An input's settings; its mapping (only when it has one) as the keys it sets."""
    plain = _plain(dataclasses.replace(spec, mapping=None))
    del plain["mapping"], plain["media_root"]  # media_root: recorded when set
    if spec.mapping is not None:
        plain["mapping"] = spec.mapping.to_plain()
    return plain


def load_run_config(path: str | os.PathLike[str]) -> RunConfig:
    """The pipeline config of the YAML file `path`, checked and with every default filled;
    relative paths in it are resolved against the file's directory. Raises RunConfigError."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise RunConfigError(file, f"cannot read the config: {err}") from None
    data, doc = parse_yaml(file, text, "the config", "name, inputs, ...")
    _check_schema(doc, data)
    return _Builder(doc, data, file.resolve().parent).config()


def run_config_from_data(data: Mapping[str, Any], base: str | os.PathLike[str] = ".") -> RunConfig:
    """The pipeline config of `data` (what a config file holds, as Python values), checked
    as a file is; relative paths in it are resolved against `base`. Raises RunConfigError
    naming the key that is wrong."""
    folder = Path(base).resolve()
    try:
        text = yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True)
    except yaml.YAMLError as err:
        raise RunConfigError(folder / "<config>", f"not plain data: {err}") from None
    parsed, doc = parse_yaml(folder / "<config>", text, "the config", "name, inputs, ...")
    _check_schema(doc, parsed)
    return _Builder(doc, parsed, folder).config()


def _check_schema(doc: YamlDocument, data: Any) -> None:
    check_schema(doc, data, validator(SCHEMA))


class _Builder:
    """Turns schema-valid config data into a RunConfig, making the checks a schema cannot."""

    def __init__(self, doc: YamlDocument, data: dict[str, Any], base: Path):
        self.doc = doc
        self.data = data
        self.base = base
        self.written_absolute: set[str] = set()

    def config(self) -> RunConfig:
        stages = self._stages(self.data.get("stages", {}))
        inputs = tuple(self._input(i, spec) for i, spec in enumerate(self.data["inputs"]))
        return RunConfig(
            name=self.data["name"],
            inputs=inputs,
            output=self._output(inputs),
            stages=stages,
            engine=self._engine(self.data.get("engine", {})),
            push=self._push(self.data["output"]),
            source=self.doc.file.resolve(),
            written_absolute=frozenset(self.written_absolute),
        )

    def _stages(self, raw: dict[str, Any]) -> Stages:
        """Each registered slice read by its declaration (an omitted one: its default, or
        off), then what the slices say of each other."""
        settings = {}
        for config in CONFIG_SLICES:
            if config.key in raw or config.on_by_default:
                reader = _SliceReader(self, config.key)
                settings[config.key] = config.read_value(raw.get(config.key, {}), reader)
            else:
                settings[config.key] = None
        return self._agree(raw, Stages(settings))

    def _agree(self, raw: dict[str, Any], stages: Stages) -> Stages:
        """The checks across slices: tokenize writes shards; pack packs tokenized sft rows
        (and caps the tokenize stage's max_tokens to its seq_len); the token filters need
        a tokenize stage."""
        tokenize, pack = stages.tokenize, stages.pack
        if tokenize and stages.shard is None:
            raise self.doc.error(
                ["stages", "tokenize"], "tokenize writes nothing with `shard: false`", key=True
            )
        if pack is not None and (tokenize is None or stages.shard is None):
            raise self.doc.error(
                ["stages", "pack"], "pack needs a tokenize stage and shards", key=True
            )
        if pack is not None and tokenize is not None and tokenize.objective != "sft":
            raise self.doc.error(
                ["stages", "pack"], f"pack packs sft rows, not {tokenize.objective} rows", key=True
            )
        if pack is not None and tokenize is not None and tokenize.max_tokens > pack.seq_len:
            stages = stages.replace(tokenize=dataclasses.replace(tokenize, max_tokens=pack.seq_len))
        if tokenize is None:
            for key in ("min_trained_tokens", "max_tokens"):
                if key in raw.get("filters", {}):
                    reason = "counts tokens, so it needs a stages.tokenize section"
                    raise self.doc.error(["stages", "filters", key], reason, key=True)
        return stages

    def _output(self, inputs: tuple[InputSpec, ...]) -> Path | storage.StoredPath:
        """The output folder: not an existing file, not one of the inputs, and holding
        none of them (a run never reads its own output: an output inside an input folder
        is left out of it, so an input inside the output could never be read). A URL
        names a prefix on an object store, checked against the stored inputs alike."""
        raw = self.data["output"]
        where: list[PathPart] = ["output", "path"] if isinstance(raw, dict) else ["output"]
        written = raw["path"] if isinstance(raw, dict) else raw
        if storage.is_url(written):
            return self._stored_output(written, inputs, where)
        output = Path(self._local(written))
        if output.exists() and not output.is_dir():
            raise self.doc.error(where, f"{output} is an existing file, not a folder")
        real = os.path.realpath(output)
        for index, spec in enumerate(inputs):
            local = _local_input(spec)
            if local is None or not _under(os.path.realpath(local), real):
                continue
            if os.path.realpath(local) == real:
                reason = f"the output folder is inputs[{index}] ({spec.path}) itself"
            else:
                reason = (
                    f"inputs[{index}] ({spec.path}) is inside the output folder {output}, "
                    "which a run never reads: put the output outside the inputs"
                )
            raise self.doc.error(where, reason)
        return output

    def _stored_output(
        self, url: str, inputs: tuple[InputSpec, ...], where: list[PathPart]
    ) -> storage.StoredPath:
        """An output prefix on an object store, apart from the stored inputs."""
        output = storage.StoredPath(url.rstrip("/"))
        for index, spec in enumerate(inputs):
            if spec.path.rstrip("/") == output or spec.path.startswith(output + "/"):
                reason = (
                    f"inputs[{index}] ({spec.path}) is the output prefix {output} or inside it, "
                    "which a run never reads: put the output outside the inputs"
                )
                raise self.doc.error(where, reason)
        return output

    def _push(self, raw: str | dict[str, Any]) -> PushSettings | None:
        """`output.push_to_hub`: a repository id, or {repo, private, revision}."""
        push = raw.get("push_to_hub") if isinstance(raw, dict) else None
        if push is None:
            return None
        return PushSettings(push) if isinstance(push, str) else PushSettings(**push)

    def _local(self, path: str) -> str:
        """`path` made absolute against the config file's directory (`~` expanded); one
        written absolute is remembered, to be recorded as written."""
        expanded = os.path.expanduser(path)
        local = os.path.abspath(os.path.join(self.base, expanded))
        if os.path.isabs(expanded):
            self.written_absolute.add(local)
        return local

    def _engine(self, raw: dict[str, Any]) -> EngineConfig:
        engine = EngineConfig(**raw)
        if engine.kind != "ray":
            for key in ("address", "num_cpus"):
                if key in raw:
                    raise self.doc.error(["engine", key], "applies only with `kind: ray`", key=True)
        return engine

    def _input(self, index: int, raw: dict[str, Any]) -> InputSpec:
        where: list[str | int] = ["inputs", index]
        name = raw.get("format", AUTO)
        if name != AUTO and name not in FORMATS:
            known = ", ".join([AUTO, *FORMATS])
            raise self.doc.error([*where, "format"], f"unknown format {name!r} (known: {known})")
        mapping = None
        if "mapping" in raw:
            if name not in (AUTO, MAPPED):
                reason = f"a mapping is read by the {MAPPED} format, not {name!r}"
                raise self.doc.error([*where, "format"], reason)
            name = MAPPED
            try:
                mapping = mapping_from_data(raw["mapping"])
            except MappingError as err:
                raise self.doc.error([*where, "mapping"], str(err)) from None
        elif name == MAPPED:
            reason = f"the {MAPPED} format needs a mapping (inputs[].mapping)"
            raise self.doc.error([*where, "format"], reason)
        path = raw["path"]
        is_hf = is_hf_input(path)
        if is_hf:
            dataset = path.removeprefix(HF_PREFIX)
            path = HF_PREFIX + (
                self._local(dataset) if dataset.startswith(_LOCAL_PREFIXES) else dataset
            )
        else:
            for key in ("split", "hf_config"):
                if key in raw:
                    reason = f"{key} applies to hf: inputs only ({raw['path']!r} is not one)"
                    raise self.doc.error([*where, key], reason, key=True)
            path = path if storage.is_url(path) else self._local(path)
        return InputSpec(
            path=path,
            format=name,
            mapping=mapping,
            split=raw.get("split", DEFAULT_HF_SPLIT) if is_hf else None,
            hf_config=raw.get("hf_config"),
            sample=float(raw.get("sample", 1.0)),
            weight=raw.get("weight", 1),
            license=raw.get("license"),
            tags=tuple(raw.get("tags", ())),
            language=tuple(raw.get("language", ())),
            media_root=self._media_root(raw.get("media_root", ())),
        )

    def _media_root(self, raw: str | list[str]) -> tuple[str, ...]:
        """An input's `media_root`: one folder or a list, each made absolute."""
        return tuple(self._local(root) for root in ([raw] if isinstance(raw, str) else raw))


class _SliceReader:
    """How a stage's slice reads its part of the config (`SliceReader`): errors at a key
    path under `stages.<key>`, local paths against the config file's folder."""

    def __init__(self, builder: _Builder, key: str):
        self.builder = builder
        self.key = key

    def error(self, where: Sequence[str | int], reason: str, *, key: bool = False) -> Exception:
        return self.builder.doc.error(["stages", self.key, *where], reason, key=key)

    def local(self, path: str) -> str:
        return self.builder._local(path)
