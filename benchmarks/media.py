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
   JSON file; a config per mode: that file, lint `fail_on: never`, tokenize with the
   repository's sample tokenizer, one `train` split, engine workers 2.
2. runs: each mode once per round, in the order above, --repeat rounds;
   `python -m pipeline.cli run CONFIG -o OUT --fresh` in a child process. The figures are
   each mode's best round.

Timings are reported, never asserted; the exit status is 1 when a run fails or writes
other than one row per thread.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE_TOKENIZER = REPO / "configs" / "sample_tokenizer"
MODES: dict[str, list[str]] = {
    "not read (baseline)": ["--no-check-media"],
    "checked": ["--no-embed-media"],
    "checked + embedded (default)": [],
    "checked + copied": ["--copy-media", "--no-embed-media"],
}


def build(folder: Path, threads: int, images: int) -> Path:
    """The images and the records naming them; returns the records' file."""
    from PIL import Image

    (folder / "img").mkdir(parents=True)
    chance = random.Random(0)
    for number in range(images):
        pixels = bytes(chance.getrandbits(8) for _ in range(256 * 256 * 3))
        Image.frombytes("RGB", (256, 256), pixels).save(
            folder / "img" / f"{number}.jpg", quality=85
        )
    records = [
        {
            "messages": [
                {"role": "user", "content": f"<image>What is in picture {index}?"},
                {"role": "assistant", "content": f"Noise, number {index % images}."},
            ],
            "images": [f"img/{index % images}.jpg"],
        }
        for index in range(threads)
    ]
    source = folder / "records.json"
    source.write_text(json.dumps(records))
    return source


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
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    command = [sys.executable, "-m", "pipeline.cli", "run", str(config), "-o", str(out)]
    done = subprocess.run([*command, "--fresh", *flags], capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"mms run {' '.join(flags)} failed:\n{done.stderr[-2000:]}")
    manifest = json.loads((out / "manifest.json").read_text())
    rows = sum(split["rows"] for split in manifest["splits"].values())
    size = sum(path.stat().st_size for path in out.rglob("*") if path.is_file())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "bytes": size, "rows": rows}


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
    source = build(folder, args.threads, args.images)
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
    base = best["not read (baseline)"]
    print("\n| mode | wall s | x baseline | CPU s | x baseline | output MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for mode, figures in best.items():
        print(
            f"| {mode} | {figures['wall']:.1f} | {figures['wall'] / base['wall']:.2f} | "
            f"{figures['cpu']:.1f} | {figures['cpu'] / base['cpu']:.2f} | "
            f"{figures['bytes'] / 1e6:.1f} |"
        )
    print(f"\nload average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
