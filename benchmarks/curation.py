"""Benchmark the curation stages (issue 34): `mms run` with all five of them against the same
run without them, side by side, and decontamination at 1x and 2x the training threads
against the same evaluation set (it must stay linear in the training data).

Run from the repository root (real threads from ../shared/realdata, the tokenizer from
../shared/tokenizers):

    python benchmarks/curation.py                         # 20,000 threads, 10,000 prompts
    python benchmarks/curation.py --threads 100000 --repeat 2

What it does: writes --threads unique real threads (as benchmarks/run.py builds them) and
an evaluation set of --prompts prompts (the openings of real answers, which no training
user turn holds, made unique, and 100 real user turns, which 8% of 100k training threads
hold), as MMS JSONL. Then, alternating --repeat times, `mms run` on the threads
(the configuration of benchmarks/run.py: lint, dedup, tokenize, one split; two workers)
without curation, and with pii, language, quality (tag), decontaminate (against the
evaluation set) and a plugin (benchmarks/curation_plugin.py: a URL count); the fastest of
each is kept and the ratio given. Then the decontaminate stage alone on 1x and 2x the
threads. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml
from run import MAX_TOKENS, run_tree, write_threads
from tokenizing import real_threads, unique_threads

REPO = Path(__file__).resolve().parent.parent
CURATION = {
    "pii": {},
    "language": {},
    "quality": {"action": "tag"},
    "plugins": [{"use": "curation_plugin:url_count", "action": "tag"}],
}


def config(path: Path, source: Path, out: Path, tokenizer: Path, stages: dict) -> Path:
    body = {
        "name": path.stem,
        "inputs": [{"path": str(source), "format": "mms"}],
        "stages": {
            "lint": {"fail_on": "never"},
            "filters": {"min_trained_tokens": 0},
            "dedup": {"enabled": True},
            "tokenize": {
                "tokenizer": str(tokenizer),
                "max_tokens": MAX_TOKENS,
                "overlong": "truncate",
            },
            "shard": {"splits": {"train": 1.0}},
            **stages,
        },
        "output": str(out),
        "engine": {"workers": 2},
    }
    path.write_text(yaml.safe_dump(body))
    return path


PLANTED = 100
"""Evaluation prompts copied from real user turns: the training threads holding one of them
are the ones decontamination finds (8% of 100k threads: the real threads are cycled)."""


def evaluation_set(threads: list, count: int, path: Path) -> None:
    """`count` MT-Bench-shaped questions: the openings (30 words) of real answers, which no
    training user turn holds, each made unique; and PLANTED real user turns, which some do."""
    answers = [
        " ".join(m.content.split()[:30])
        for t in threads
        for m in t.messages
        if m.role == "assistant" and len(m.content.split()) >= 20
    ]
    prompts = [
        m.content for t in threads for m in t.messages if m.role == "user" and len(m.content) > 40
    ]
    with open(path, "w", encoding="utf-8") as out:
        for index in range(count):
            if index < PLANTED:
                turn = prompts[index * 7 % len(prompts)]
            else:
                turn = f"{answers[index % len(answers)]} (variant {index})"
            out.write(json.dumps({"question_id": index, "turns": [turn]}) + "\n")


def timed(name: str, config_file: Path, workdir: Path) -> tuple[float, float]:
    """The run's wall seconds and the CPU seconds of its process tree."""
    env = {"PYTHONPATH": f"{REPO}:{REPO / 'benchmarks'}", "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-m", "pipeline.cli", "run", str(config_file), "--fresh"]
    run = run_tree(name, command, workdir / f"{name}.log", env, None)
    if run.returncode != 0:
        raise SystemExit(f"{name} failed: see {workdir / (name + '.log')}")
    return run.seconds, run.cpu_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=20_000)
    parser.add_argument("--prompts", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--realdata", type=Path, default=REPO.parent / "shared" / "realdata")
    parser.add_argument(
        "--tokenizer",
        type=Path,
        default=REPO.parent / "shared" / "tokenizers" / "llama3_from_tiktoken",
    )
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
        curated = {**CURATION, "decontaminate": {"against": [str(evals)], "action": "tag"}}
        plain = config(work / "plain.yaml", one, work / "out-plain", args.tokenizer, {})
        full = config(work / "curated.yaml", one, work / "out-curated", args.tokenizer, curated)
        best: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for _ in range(args.repeat):
            for name, file in (("without", plain), ("with all five", full)):
                seconds, cpu_seconds = timed(name.replace(" ", "-"), file, work)
                best[name] = min(best.get(name, seconds), seconds)
                cpu[name] = min(cpu.get(name, cpu_seconds), cpu_seconds)
        decontaminate = {"decontaminate": {"against": [str(evals)], "action": "tag"}}
        lone: dict[str, float] = {}
        for label, source in (("1x", one), ("2x", two)):
            file = config(
                work / f"decon-{label}.yaml",
                source,
                work / f"out-{label}",
                args.tokenizer,
                decontaminate,
            )
            base = config(
                work / f"base-{label}.yaml", source, work / f"base-{label}", args.tokenizer, {}
            )
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
    print(
        f"decontaminate alone, 1x: +{lone['1x']:.2f} s, 2x: +{lone['2x']:.2f} s (ratio {lone['2x'] / max(lone['1x'], 1e-9):.2f})"
    )


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - start:.0f} s)")
