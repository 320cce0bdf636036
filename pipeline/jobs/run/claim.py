"""Where a run works and on what: the output it claims (a local folder, or a prefix of an
object store whose work directory the store mirrors) and the engine's runner. The run
writes into the claim's local staging folder and work directory whichever it is; what
differs is only how the work directory is made ready, how the output is published and
what a finished run removes (pipeline/output/folder.py, pipeline/output/stored.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from pipeline import storage
from pipeline.engine import LocalRunner, Runner, reset_workdir
from pipeline.engine.ray import RayRunner, RaySettings
from pipeline.engine.stored_work import fetch_work, reset_stored_work
from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.outputs import input_records
from pipeline.jobs.run.work_removal import engine_removal
from pipeline.output.folder import OutputFolder, Publication
from pipeline.output.manifest import listed_files, versions
from pipeline.output.stored import StoredOutput
from pipeline.sources import is_hf_input
from pipeline.sources.parts import InputPart

LOCAL_WORKERS = 2
"""Worker processes of the local engine when neither the config nor --workers says."""


def engine_runner(config: RunConfig, workers: int | None = None) -> Runner:
    """The runner of the config's engine (`workers` overrides its `workers`)."""
    engine = config.engine
    if engine.kind == "ray":
        return RayRunner(RaySettings(engine.address, engine.num_cpus, workers or engine.workers))
    return LocalRunner(workers or engine.workers or LOCAL_WORKERS)


@dataclass
class Claim:
    """A claimed output and the runner of the run that writes it. `out` is where the output
    is published (the folder, or the stored prefix); `folder` the local folder the run
    writes (its `staging` and `work`: the folder itself, or a scratch folder whose work
    directory the store's, `stored.work_url`, mirrors)."""

    out: Path | storage.StoredPath
    folder: OutputFolder
    runner: Runner
    stored: StoredOutput | None = None

    @property
    def work(self) -> Path:
        """The local work directory (the parts, the partition pass, the decisions)."""
        return self.folder.work

    @property
    def staging(self) -> Path:
        """Where the output is written before it is published."""
        return self.folder.staging

    @property
    def work_url(self) -> str | None:
        """The store's work directory that every finished part is uploaded to, if any."""
        return None if self.stored is None else self.stored.work_url

    def finished_before(self, config: RunConfig, parts: list[InputPart]) -> bool:
        """Whether the output holds the finished output of this config and these inputs,
        as this version of mms writes it: its manifest has the config's digest, the same
        versions and inputs (sha256), a passed gate, and every file it lists is as it was
        written."""
        place = self.folder if self.stored is None else self.stored
        manifest = place.earlier
        if manifest is None or any(is_hf_input(part.path) for part in parts):
            return False
        digest, made_by = manifest.get("config_sha256"), manifest.get("versions")
        if digest != config.digest() or made_by != versions():
            return False
        if (manifest.get("gate") or {}).get("passed") is not True:
            return False
        if set(listed_files(manifest)) - place.unchanged:
            return False
        inputs = [record.to_dict() for record in input_records(config, parts)]
        return manifest.get("inputs") == inputs

    def forget_work(self) -> None:
        """Empty the work directory of an earlier run's parts (`--fresh`)."""
        if self.stored is None:
            reset_workdir(self.folder.work)
        else:
            reset_stored_work(self.stored.work_url)

    def fetch_work(self, parts: list[InputPart]) -> None:
        """Bring the plan and the finished parts from the store's work directory, so a run
        stopped anywhere resumes (nothing to do for a local folder)."""
        if self.stored is not None:
            fetch_work(self.stored.work_url, self.folder.work, parts)

    def publish(self) -> Publication:
        """Publish the staged output: moved into the folder, or uploaded, the manifest
        last."""
        return self.folder.publish() if self.stored is None else self.stored.publish()

    @property
    def published(self) -> Path:
        """The published output as this machine reads it: the folder, or the local copy of
        what was uploaded."""
        return self.folder.root if isinstance(self.out, storage.StoredPath) else self.out

    def finish(self) -> None:
        """Remove the work directory: the output is complete, or was already."""
        if self.stored is None:
            self.folder.finish(engine_removal(self.runner))
        else:
            self.stored.finish()


@contextmanager
def claimed(
    config: RunConfig,
    target: Path | str,
    workers: int | None = None,
    overwrite: bool = False,
) -> Iterator[Claim]:
    """Claim `target` (a folder, or an object store URL: its prefix) and start the
    config's engine (`workers` overrides the config's); released, and the engine stopped,
    on leaving. A folder is claimed before the engine starts; a prefix's scratch folder
    is given up after the engine stops."""
    with ExitStack() as held:
        if storage.is_url(str(target)):
            stored = held.enter_context(StoredOutput(str(target), overwrite=overwrite))
            runner = held.enter_context(engine_runner(config, workers))
            yield Claim(stored.root, stored.local, runner, stored)
            return
        out = Path(target).resolve()
        engine = held.enter_context(ExitStack())
        folder = held.enter_context(OutputFolder(out, overwrite=overwrite))
        runner = engine.enter_context(engine_runner(config, workers))
        yield Claim(out, folder, runner)
