"""Benchmark the curation stages: `mms run` with all five of them against the same run
without them, side by side, and decontamination at 1x and 2x the training threads against
the same evaluation set (it must stay linear in the training data).

Run from the repository root (real threads from $MMS_SHARED/realdata, the tokenizer from
$MMS_SHARED/tokenizers; default ../shared):

    python benchmarks/curation.py                         # 20,000 threads, 10,000 prompts
    python benchmarks/curation.py --threads 100000 --repeat 2

What it does: writes --threads unique real threads and an evaluation set of --prompts
prompts (the openings of real answers, which no training user turn holds, made unique, and
100 real user turns, which 8% of 100k training threads hold), as MMS JSONL
(harness/corpus.py). Then, alternating --repeat times, `mms run` on the threads (the run
benchmark's configuration: lint, dedup, tokenize, one split; two workers) without curation,
and with pii, language, quality (tag), decontaminate (against the evaluation set) and a
plugin (benchmarks/curation_plugin.py: a URL count); the fastest of each is kept and the
ratio given. Then the decontaminate stage alone on 1x and 2x the threads. Timings are
reported, never asserted.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.corpus import evaluation_set, real_threads, unique_threads, write_config, write_threads
from harness.options import add_data
from harness.procs import run_child
from harness.trees import headline, measured_tree, mms_command, tree_env

CURATION = {
    "pii": {},
    "language": {},
    "quality": {"action": "tag"},
    "plugins": [{"use": "curation_plugin:url_count", "action": "tag"}],
}


def config(path: Path, source: Path, out: Path, tokenizer: Path, stages: dict[str, Any]) -> Path:
    """The run config with `stages` added (media as the run's default)."""
    write_config(path, source, out, tokenizer, stages=stages, media="")
    return path


def timed(name: str, config_file: Path, workdir: Path) -> tuple[float, float]:
    """The run's wall seconds and the CPU seconds of its process tree (the plugin imported
    from benchmarks/)."""
    env = tree_env(measured_tree(), benchmarks=True)
    log = workdir / f"{name}.log"
    run = run_child(name, [*mms_command(), "run", str(config_file), "--fresh"], log, env=env)
    if run.returncode != 0:
        raise SystemExit(f"{name} failed: see {log}")
    return run.seconds, run.cpu_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=20_000)
    parser.add_argument("--prompts", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=1)
    add_data(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mms-curation-") as folder:
        work = Path(folder)
        real, _ = real_threads(args.realdata)
        threads = unique_threads(real, args.threads * 2)
        one, two = work / "threads-1x.jsonl", work / "threads-2x.jsonl"
        write_threads(threads[: args.threads], one)
        write_threads(threads, two)
        evals = work / "evaluation.jsonl"
        evaluation_set(real, args.prompts, evals)
        decontaminate = {"decontaminate": {"against": [str(evals)], "action": "tag"}}
        plain = config(work / "plain.yaml", one, work / "out-plain", args.tokenizer, {})
        curated = {**CURATION, **decontaminate}
        full = config(work / "curated.yaml", one, work / "out-curated", args.tokenizer, curated)
        best: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for _ in range(args.repeat):
            for name, file in (("without", plain), ("with all five", full)):
                seconds, cpu_seconds = timed(name.replace(" ", "-"), file, work)
                best[name] = min(best.get(name, seconds), seconds)
                cpu[name] = min(cpu.get(name, cpu_seconds), cpu_seconds)
        lone: dict[str, float] = {}
        for label, source in (("1x", one), ("2x", two)):
            out, base_out = work / f"out-{label}", work / f"base-{label}"
            file = config(work / f"decon-{label}.yaml", source, out, args.tokenizer, decontaminate)
            base = config(work / f"base-{label}.yaml", source, base_out, args.tokenizer, {})
            lone[label] = (
                timed(f"decon-{label}", file, work)[0] - timed(f"base-{label}", base, work)[0]
            )
    without, with_all = best["without"], best["with all five"]
    print(f"threads {args.threads:,}, evaluation prompts {args.prompts:,}")
    print(f"mms run without curation      {without:8.2f} s")
    print(
        f"mms run with all five stages  {with_all:8.2f} s  (+{(with_all - without) / without:.1%})"
    )
    plain_cpu, full_cpu = cpu["without"], cpu["with all five"]
    print(
        f"CPU seconds of the process tree {plain_cpu:.1f} -> {full_cpu:.1f}"
        f" (+{(full_cpu - plain_cpu) / plain_cpu:.1%}; the least of each over the repeats)"
    )
    ratio = lone["2x"] / max(lone["1x"], 1e-9)
    print(
        f"decontaminate alone, 1x: +{lone['1x']:.2f} s, 2x: +{lone['2x']:.2f} s (ratio {ratio:.2f})"
    )
    headline(
        lower={
            "without curation s": without,
            "with all five s": with_all,
            "with all five CPU s": full_cpu,
            "decontaminate alone 2x s": lone["2x"],
        }
    )


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - start:.0f} s)")
