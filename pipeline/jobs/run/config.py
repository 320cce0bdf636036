"""The `mms run` pipeline config: a YAML file checked against
schemas/pipeline-config.schema.json and then for what a schema cannot say (split fractions
summing to 1, known formats and lint rules, a tokenizer a work unit can load, an output
folder apart from the inputs), read into frozen dataclasses with every default filled.

Relative paths in the config (input paths and globs, `hf:./dir` datasets, the tokenizer,
`output`) are resolved against the directory of the CONFIG FILE, never the working
directory, so a config means the same files wherever `mms run` is started. Input paths are
not checked here (the run reports what it cannot read); the tokenizer is.

Every problem is a RunConfigError naming the file, the key path, what is wrong and the
line of the YAML it comes from. The YAML is read only by the data-only safe loader of
pipeline.sources.yaml_text: no tag ever constructs an object.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pipeline.config_file import ConfigFileError as RunConfigError
from pipeline.config_file import PathPart, YamlDocument, check_schema, parse_yaml
from pipeline.formats import AUTO, FORMATS
from pipeline.formats.field_mapping import FieldMapping, MappingError, mapping_from_data
from pipeline.formats.mapped import NAME as MAPPED
from pipeline.lint import UnknownRuleError, select_rules
from pipeline.schemas import validator
from pipeline.sources.paths import HF_PREFIX
from pipeline.stages.curate.plugins import PluginError, load_plugin
from pipeline.stages.curate.settings import CurationSettings
from pipeline.stages.dedup import DedupSettings
from pipeline.stages.filters import FilterSettings
from pipeline.stages.lint import LintSettings
from pipeline.stages.normalize import NormalizeSettings
from pipeline.stages.pack import PackSettings
from pipeline.stages.split import ShardSettings
from pipeline.stages.tokenize import TokenizeSettings, renderer_for
from pipeline.tokenize.loading import (
    TokenizerLoadError,
    check_tokenizer,
    hub_cache_folder,
    hub_name,
)

SCHEMA = "pipeline-config"
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

    @property
    def is_hf(self) -> bool:
        """Whether the input is a Hugging Face dataset (`hf:ORG/NAME` or `hf:/abs/dir`)."""
        return self.path.startswith(HF_PREFIX)


@dataclass(frozen=True, slots=True)
class Stages:
    """Each stage's slice of the config (the settings classes live beside their stages in
    pipeline/stages/); `tokenize` None: no tokenization; `shard` None: no shards."""

    normalize: NormalizeSettings = field(default_factory=NormalizeSettings)
    lint: LintSettings = field(default_factory=LintSettings)
    filters: FilterSettings = field(default_factory=FilterSettings)
    dedup: DedupSettings = field(default_factory=DedupSettings)
    tokenize: TokenizeSettings | None = None
    shard: ShardSettings | None = field(default_factory=ShardSettings)
    pack: PackSettings | None = None
    curation: CurationSettings = field(default_factory=CurationSettings)
    """The curation stages' slices (pii, language, quality, decontaminate, plugins)."""


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
    the ordered pass (memory bounded by a part's keys, not the dataset's): `auto` (None)
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
    output: Path
    stages: Stages = field(default_factory=Stages)
    engine: EngineConfig = field(default_factory=EngineConfig)
    push: PushSettings | None = None
    source: Path | None = None
    written_absolute: frozenset[str] = frozenset()
    """The local paths the config file writes as absolute paths (resolved): outputs record
    them, and the files under them, as written, never relative to the config's folder."""

    def _curation_plain(self) -> dict[str, Any]:
        """The curation slices set, the evaluation inputs as the config records paths."""
        plain = self.stages.curation.to_plain()
        if "decontaminate" in plain:
            against = plain["decontaminate"]["against"]
            plain["decontaminate"]["against"] = [self.recorded_path(path) for path in against]
        return plain

    def resolved(self) -> dict[str, Any]:
        """The config as plain JSON data, every default filled, local paths as
        `recorded_path` gives them (so the manifest and its config digest do not depend on
        where the checkout lives)."""
        stages = self.stages
        tokenize = _plain(stages.tokenize) if stages.tokenize else None
        if tokenize is not None:
            tokenize["tokenizer"] = self.recorded_path(tokenize["tokenizer"])
        return {
            "name": self.name,
            "inputs": [
                {**_input_plain(spec), "path": self.recorded_path(spec.path)}
                for spec in self.inputs
            ],
            "stages": {
                "normalize": _plain(stages.normalize),
                "lint": _plain(stages.lint),
                "filters": _plain(stages.filters),
                "dedup": _plain(stages.dedup),
                "tokenize": tokenize,
                "shard": _shard_plain(stages.shard) if stages.shard else False,
                **({"pack": _plain(stages.pack)} if stages.pack else {}),
                **self._curation_plain(),
            },
            "output": self.recorded_path(self.output),
            "engine": self.engine.to_plain(),
            **({"push_to_hub": self.push.to_plain()} if self.push else {}),
        }

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
    del plain["mapping"]
    if spec.mapping is not None:
        plain["mapping"] = spec.mapping.to_plain()
    return plain


def _shard_plain(shard: ShardSettings) -> dict[str, Any]:
    return {**_plain(shard), "splits": dict(shard.splits)}


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
        stages = self.data.get("stages", {})
        tokenize = self._tokenize(stages["tokenize"]) if "tokenize" in stages else None
        shard = self._shard(stages.get("shard", {}))
        if tokenize and shard is None:
            raise self.doc.error(
                ["stages", "tokenize"], "tokenize writes nothing with `shard: false`", key=True
            )
        pack = PackSettings(**stages["pack"]) if "pack" in stages else None
        if pack is not None and (tokenize is None or shard is None):
            raise self.doc.error(
                ["stages", "pack"], "pack needs a tokenize stage and shards", key=True
            )
        if pack is not None and tokenize is not None and tokenize.objective != "sft":
            raise self.doc.error(
                ["stages", "pack"], f"pack packs sft rows, not {tokenize.objective} rows", key=True
            )
        if pack is not None and tokenize is not None and tokenize.max_tokens > pack.seq_len:
            tokenize = dataclasses.replace(tokenize, max_tokens=pack.seq_len)
        inputs = tuple(self._input(i, spec) for i, spec in enumerate(self.data["inputs"]))
        return RunConfig(
            name=self.data["name"],
            inputs=inputs,
            output=self._output(inputs),
            stages=Stages(
                normalize=NormalizeSettings(**stages.get("normalize", {})),
                lint=self._lint(stages.get("lint", {})),
                filters=self._filters(stages.get("filters", {}), tokenize),
                dedup=DedupSettings.from_config(stages.get("dedup", {})),
                tokenize=tokenize,
                shard=shard,
                pack=pack,
                curation=self._curation(stages),
            ),
            engine=self._engine(self.data.get("engine", {})),
            push=self._push(self.data["output"]),
            source=self.doc.file.resolve(),
            written_absolute=frozenset(self.written_absolute),
        )

    def _output(self, inputs: tuple[InputSpec, ...]) -> Path:
        """The output folder: not an existing file, not one of the inputs, and holding
        none of them (a run never reads its own output: an output inside an input folder
        is left out of it, so an input inside the output could never be read)."""
        raw = self.data["output"]
        where: list[PathPart] = ["output", "path"] if isinstance(raw, dict) else ["output"]
        output = Path(self._local(raw["path"] if isinstance(raw, dict) else raw))
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

    def _curation(self, stages: dict[str, Any]) -> CurationSettings:
        """The curation slices, the evaluation inputs' paths made absolute, each plugin
        loaded once here, so that one that cannot be is an error at its line."""
        settings = CurationSettings.from_config(stages, self._local)
        for index, spec in enumerate(settings.plugins):
            try:
                load_plugin(spec.use)
            except PluginError as err:
                raise self.doc.error(["stages", "plugins", index, "use"], str(err)) from None
        return settings

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
        where = ["inputs", index]
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
        is_hf = path.startswith(HF_PREFIX)
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
            path = self._local(path)
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
        )

    def _lint(self, raw: dict[str, Any]) -> LintSettings:
        ignores = raw.get("per_source_ignores", {})
        for glob, selectors in ignores.items():
            for index, selector in enumerate(selectors):
                try:
                    select_rules([selector])
                except UnknownRuleError as err:
                    where = ["stages", "lint", "per_source_ignores", glob, index]
                    raise self.doc.error(where, str(err)) from None
        plain = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
        plain["per_source_ignores"] = tuple((g, tuple(s)) for g, s in ignores.items())
        stage = LintSettings(**plain)
        for key in ("select", "ignore", "drop_on"):
            for index, selector in enumerate(getattr(stage, key)):
                try:
                    select_rules([selector])
                except UnknownRuleError as err:
                    raise self.doc.error(["stages", "lint", key, index], str(err)) from None
        selected = {rule.code for rule in select_rules(stage.select, stage.ignore)}
        for index, selector in enumerate(stage.drop_on):
            if not {rule.code for rule in select_rules([selector])} & selected:
                reason = f"{selector} is not among the selected rules, so it could drop nothing"
                raise self.doc.error(["stages", "lint", "drop_on", index], reason)
        return stage

    def _filters(self, raw: dict[str, Any], tokenize: TokenizeSettings | None) -> FilterSettings:
        stage = FilterSettings(**raw)
        where = ["stages", "filters"]
        if stage.max_messages is not None and stage.max_messages < stage.min_messages:
            reason = f"max_messages {stage.max_messages} is below min_messages {stage.min_messages}"
            raise self.doc.error([*where, "max_messages"], reason)
        if tokenize is None:
            for key in ("min_trained_tokens", "max_tokens"):
                if key in raw:
                    reason = "counts tokens, so it needs a stages.tokenize section"
                    raise self.doc.error([*where, key], reason, key=True)
        return stage

    def _tokenize(self, raw: dict[str, Any]) -> TokenizeSettings:
        raw = self._objective_defaults(raw)
        spec = raw["tokenizer"]
        local = self._local(spec)
        where = ["stages", "tokenize", "tokenizer"]
        if os.path.isdir(local) and not os.path.isfile(os.path.join(local, "tokenizer.json")):
            raise self.doc.error(where, f"{local} has no tokenizer.json")
        if os.path.exists(local):
            return self._check_tokenizer(TokenizeSettings(**{**raw, "tokenizer": local}))
        if hub_name(spec):
            from huggingface_hub import try_to_load_from_cache

            if isinstance(try_to_load_from_cache(spec, "tokenizer.json"), str):
                return self._check_tokenizer(TokenizeSettings(**raw))
            reason = (
                f"no such file or directory {local}, and {spec} is not in the local Hugging "
                f"Face cache (looked in {hub_cache_folder()}; mms never downloads: fetch it "
                f"once with `huggingface-cli download {spec} tokenizer.json "
                "tokenizer_config.json`)"
            )
            raise self.doc.error(where, reason)
        raise self.doc.error(where, f"no such file or directory: {local}")

    def _objective_defaults(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The tokenize slice with what an objective other than sft implies (the final turn
        trained, overlong threads dropped), or an error where it says otherwise."""
        objective = raw.get("objective", "sft")
        if objective == "sft":
            return raw
        where = ["stages", "tokenize"]
        if raw.get("train_on", "last_assistant") != "last_assistant":
            raise self.doc.error(
                [*where, "train_on"],
                f"objective {objective} trains the final turn only: "
                "train_on must be last_assistant (its default)",
            )
        if raw.get("overlong") == "truncate":
            raise self.doc.error(
                [*where, "overlong"],
                f"truncate cuts the final turn a {objective} row is made "
                "of: use drop (its default) or error",
            )
        return {"train_on": "last_assistant", "overlong": "drop", **raw}

    def _check_tokenizer(self, settings: TokenizeSettings) -> TokenizeSettings:
        """`settings`, once the tokenizer they name is loaded as every work unit loads
        it: a tokenizer no unit could load, or a `bos` it has no token for, is refused
        before any unit starts (a unit that fails on it cannot be fixed by running
        again). The structure is checked first (remembered per file), for the clearer
        message; the loaded renderer is kept for this process's units."""
        where = ["stages", "tokenize", "tokenizer"]
        try:
            check_tokenizer(settings.tokenizer)
            renderer_for(settings)
        except (TokenizerLoadError, OSError) as err:
            raise self.doc.error(where, f"not a usable tokenizer: {err}") from None
        except ValueError as err:  # the renderer refuses it: a bos it names no token for
            if settings.bos and "bos" in str(err):
                where = ["stages", "tokenize", "bos"]
            raise self.doc.error(where, str(err)) from None
        return settings

    def _shard(self, raw: dict[str, Any] | Literal[False]) -> ShardSettings | None:
        if raw is False:
            return None
        splits = tuple((name, float(value)) for name, value in raw.get("splits", {}).items())
        total = sum(value for _, value in splits)
        if splits and not math.isclose(total, 1.0, abs_tol=1e-9):
            shown = " + ".join(f"{name} {value:g}" for name, value in splits)
            reason = f"split fractions must sum to 1, these sum to {total:g} ({shown})"
            raise self.doc.error(["stages", "shard", "splits"], reason, key=True)
        return ShardSettings(**{**raw, **({"splits": splits} if splits else {})})
