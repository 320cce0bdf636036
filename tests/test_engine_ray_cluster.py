"""The Ray engine on a cluster of several nodes: a worker node lost mid-run (its
raylet, object store and every worker process gone at once, as when a machine dies) ends
with the bytes of an uninterrupted run, whether it is lost during the map side (replaced or
not) or during the partition pass, and so does a run whose driver is killed as a node is
lost, started again on the nodes left. The cluster is simulated on this machine
(`ray.cluster_utils.Cluster`: a head node without CPUs and worker nodes of one CPU, each its
own raylet and object store); the driver is a `mms run` child process, as on a real
cluster."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from pipeline.jobs.run.partition import REPEATED_DIR
from tests.cluster_gate import add_gate, gate_of
from tests.conftest import REPO
from tests.realdata_mix import write_mix_config
from tests.test_run import output_files, run_cli

pytest.importorskip("ray", reason="the ray extra is not installed (pip install '.[ray]')")

from ray.cluster_utils import Cluster

NODE_MEMORY = 128 * 1024 * 1024
"""Each node's object store (the runs below hold a few MiB in it)."""


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A head node without CPUs (the driver's node: no task runs there, so losing a worker
    node loses every worker on it) and two worker nodes of one CPU each; stopped after the
    test (`Cluster.shutdown` ends its own processes only). Token authentication off: it
    serves this machine's tests only."""
    previous = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    made = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "include_dashboard": False,
            "object_store_memory": NODE_MEMORY,
        },
    )
    try:
        for _ in range(2):
            made.add_node(num_cpus=1, object_store_memory=NODE_MEMORY)
        made.wait_for_nodes()
        yield made
    finally:
        made.shutdown()
        if previous is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = previous


@pytest.fixture(scope="module")
def realdata(data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The real-files mix of tests/test_engine_ray.py (dedup exact and near, a weight, a
    sample, three splits) with the gate plugin of tests/cluster_gate.py (open), and the
    bytes the local engine writes for it."""
    folder = tmp_path_factory.mktemp("cluster-realdata")
    config = write_mix_config(folder / "ray-realdata.yaml", data / "realdata")
    add_gate(config)
    local = folder / "local" / "out"
    result = run_cli(str(config), "-o", str(local), "--workers", "2")
    assert result.exit_code == 0, result.output
    return config, output_files(local)


def same_but_engine(local: dict[str, bytes], on_ray: dict[str, bytes]) -> None:
    """Every file byte-identical, the manifest but for the engine its config records
    (here with the cluster's address)."""
    assert set(local) == set(on_ray)
    for name, data in local.items():
        if name == "manifest.json":
            ours, theirs = orjson.loads(data), orjson.loads(on_ray[name])
            assert theirs["config"].pop("engine")["kind"] == "ray"
            ours["config"].pop("engine")
            assert theirs == ours, "the manifests differ beyond the engine"
        else:
            assert on_ray[name] == data, f"{name} differs from the uninterrupted run's"


def _driver(config: Path, out: Path, address: str) -> subprocess.Popen[bytes]:
    """`mms run` on the cluster, two workers (one per worker node)."""
    command = [sys.executable, "-m", "pipeline.cli", "run", str(config), "-o", str(out)]
    return subprocess.Popen(
        [*command, "--engine", "ray", "--ray-address", address, "--workers", "2"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _wait(child: subprocess.Popen[bytes], ready: Any, what: str) -> None:
    """Wait until `ready()`, failing if the driver ends first or nothing happens."""
    deadline = time.monotonic() + 120
    while not ready():
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        assert time.monotonic() < deadline, f"the Ray run never reached: {what}"
        time.sleep(0.02)


def _finished(child: subprocess.Popen[bytes]) -> str:
    """What the driver said on stderr (its summary), once it has ended well."""
    _, said = child.communicate(timeout=180)
    assert child.returncode == 0, said.decode(errors="replace")
    return said.decode(errors="replace")


def _done(out: Path) -> int:
    return len(list((out / ".work" / "parts").glob("*/DONE")))


def _planned(out: Path) -> int:
    return len(orjson.loads((out / ".work" / "plan.json").read_bytes())["parts"])


def _lose_a_worker_node(cluster: Cluster, *, replace: bool) -> None:
    """Kill a worker node whole (its raylet, object store and workers, with SIGKILL); with
    `replace`, start another, as a cluster's autoscaler replaces a lost machine."""
    node = sorted(cluster.worker_nodes, key=lambda n: n.unique_id)[0]
    cluster.remove_node(node, allow_graceful=False)
    if replace:
        cluster.add_node(num_cpus=1, object_store_memory=NODE_MEMORY)


@pytest.mark.slow
@pytest.mark.parametrize("replace", [True, False], ids=["replaced", "not-replaced"])
def test_a_worker_node_lost_during_the_map_side_finishes_with_the_same_bytes(
    realdata: tuple[Path, dict], tmp_path: Path, cluster: Cluster, replace: bool
) -> None:
    """The part task lost with the node is run again, on the node that replaces it, or the
    remaining node does the rest of the parts alone."""
    config, expected = realdata
    out = tmp_path / "map" / "out"
    gate = gate_of(config)
    gate.unlink()  # the second input's parts wait until the node is lost
    try:
        child = _driver(config, out, cluster.address)
        _wait(child, lambda: (out / ".work" / "plan.json").is_file() and _done(out) >= 1, "a part")
        _lose_a_worker_node(cluster, replace=replace)
        assert _done(out) < _planned(out), "the map side ended before the node was lost"
    finally:
        gate.touch()
    _finished(child)
    same_but_engine(expected, output_files(out))


@pytest.mark.slow
def test_a_worker_node_lost_during_the_partition_pass_finishes_with_the_same_bytes(
    realdata: tuple[Path, dict], tmp_path: Path, cluster: Cluster
) -> None:
    """Every part done and the partition pass begun: its tasks write their files to the
    work directory; losing a node loses the tasks running there, which Ray runs again on
    the node left (a retried task writes the same files, atomically)."""
    config, expected = realdata
    out = tmp_path / "partition" / "out"
    child = _driver(config, out, cluster.address)
    repeated = out / ".work" / REPEATED_DIR
    _wait(child, lambda: repeated.is_dir() and any(repeated.iterdir()), "the partition pass")
    _lose_a_worker_node(cluster, replace=False)
    assert not (out / "manifest.json").exists(), "the run ended before the node was lost"
    _finished(child)
    same_but_engine(expected, output_files(out))


@pytest.mark.slow
def test_a_run_whose_driver_and_a_node_are_lost_resumes_to_the_same_bytes(
    realdata: tuple[Path, dict], tmp_path: Path, cluster: Cluster
) -> None:
    """The driver killed mid-run and a worker node lost with it: the job's tasks on the
    node left end with the driver (the resumed run waits for them), and a new driver on the
    smaller cluster reuses the finished parts and ends with the uninterrupted run's bytes."""
    config, expected = realdata
    out = tmp_path / "resumed" / "out"
    child = _driver(config, out, cluster.address)
    _wait(child, lambda: (out / ".work" / "plan.json").is_file() and _done(out) >= 2, "2 parts")
    child.kill()
    child.wait()
    _lose_a_worker_node(cluster, replace=False)
    done, planned = _done(out), _planned(out)
    assert 2 <= done < planned, f"not killed mid-way ({done} of {planned} done)"
    assert not (out / "manifest.json").exists()
    said = _finished(_driver(config, out, cluster.address))
    resumed = re.search(rf"Resumed: (\d+) of {planned} parts", said)
    assert resumed and int(resumed.group(1)) >= done, said  # a part in flight may end too
    same_but_engine(expected, output_files(out))
