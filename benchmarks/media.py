"""Benchmark what media cost `mms run`: the same image threads run with their media not
read (`--no-check-media`, the baseline), checked only (`--no-embed-media`), checked and
embedded in the shards (the default), and checked and copied into the output
(`--copy-media --no-embed-media`): wall time, CPU of the run's process tree, and output
bytes, each as a ratio to the baseline run in the same invocation.

Run from the repository root, with the package installed:

    python benchmarks/media.py                        # 20,000 threads, 2,000 images
    python benchmarks/media.py --threads 2000 --images 200 --repeat 1   # smoke run

1. build (untimed): --images distinct JPEGs (Pillow, 256x256 noise, about 50 KB each) in
   an `img/` folder, and --threads records in LLaMA-Factory's multimodal shape
   (`messages` with one `<image>` tag, `images` naming one of the files, in turn), one
   JSON file (harness/synthetic.py); a config: that file, lint `fail_on: never`, tokenize with the
   repository's sample tokenizer, one `train` split, engine workers 2.
2. runs: each mode once per round, in the order above, --repeat rounds;
   `python -m pipeline.cli run CONFIG -o OUT --fresh` in a child process. The figures are
   each mode's best round.

Timings are reported, never asserted; the exit status is 1 when a run fails or writes
other than one row per thread.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from harness import REPO_ROOT
from harness.corpus import manifest_rows
from harness.procs import checked, load_average, run_child
from harness.synthetic import image_records
from harness.trees import headline, mms_command

SAMPLE_TOKENIZER = REPO_ROOT / "configs" / "sample_tokenizer"
MODES: dict[str, list[str]] = {
    "not read (baseline)": ["--no-check-media"],
    "checked": ["--no-embed-media"],
    "checked + embedded (default)": [],
    "checked + copied": ["--copy-media", "--no-embed-media"],
}


def write_config(folder: Path, source: Path) -> Path:
    config = folder / "run.yaml"
    config.write_text(
        f"name: media-bench\ninputs:\n  - path: {source}\n"
        "stages:\n  lint: {fail_on: never}\n"
        f"  tokenize: {{tokenizer: {SAMPLE_TOKENIZER}}}\n"
        "  shard: {splits: {train: 1.0}}\n"
        "engine: {workers: 2}\noutput: out\n"
    )
    return config


def run_once(config: Path, out: Path, flags: list[str]) -> dict[str, float]:
    """One `mms run` in a child: wall and CPU seconds, the output's bytes and rows."""
    command = [*mms_command(), "run", str(config), "-o", str(out), "--fresh", *flags]
    log = out.parent / "run.log"
    try:
        run = checked(run_child(f"mms run {' '.join(flags)}", command, log), log)
    except RuntimeError as err:
        raise SystemExit(str(err)) from None
    size = sum(path.stat().st_size for path in out.rglob("*") if path.is_file())
    return {"wall": run.seconds, "cpu": run.cpu_seconds, "bytes": size, "rows": manifest_rows(out)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=20_000)
    parser.add_argument("--images", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    folder = args.workdir or Path(tempfile.mkdtemp(prefix="mms-media-bench-"))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    source = image_records(folder, args.threads, args.images)
    config = write_config(folder, source)
    print(f"{args.threads:,} threads, {args.images:,} images in {folder}", flush=True)
    best: dict[str, dict[str, float]] = {}
    for round_number in range(args.repeat):
        for mode, flags in MODES.items():
            figures = run_once(config, folder / "out", flags)
            if figures["rows"] != args.threads:
                print(f"{mode}: {figures['rows']:,} rows for {args.threads:,} threads")
                return 1
            print(f"round {round_number + 1} {mode}: {figures['wall']:.1f} s", flush=True)
            if mode not in best or figures["wall"] < best[mode]["wall"]:
                best[mode] = figures
    if args.workdir is None:
        shutil.rmtree(folder, ignore_errors=True)
    base = best["not read (baseline)"]
    print("\n| mode | wall s | x baseline | CPU s | x baseline | output MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for mode, figures in best.items():
        print(
            f"| {mode} | {figures['wall']:.1f} | {figures['wall'] / base['wall']:.2f} | "
            f"{figures['cpu']:.1f} | {figures['cpu'] / base['cpu']:.2f} | "
            f"{figures['bytes'] / 1e6:.1f} |"
        )
    print(f"\nload average {load_average()[0]:.1f}")
    headline(lower={f"{mode} s": figures["wall"] for mode, figures in best.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
