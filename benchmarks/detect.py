"""Benchmark what auto-detection costs: its share of `mms convert` on every file of
$MMS_SHARED/realdata (and of more folders, when given), for this checkout and another
commit side by side.

    python benchmarks/detect.py                          # this checkout against HEAD~10
    python benchmarks/detect.py --before c33fc2b --repeat 3 --also /path/to/more/files

What it does: the other commit is checked out in a temporary git worktree. Each checkout
runs, in a child process of its own (`--measure`, alternating, --repeat times), a
`pipeline.convert` of the inputs (one worker, the output to a temporary file) with the
detection functions wrapped to add up their time: `detect` (a file's first records
sniffed by every format) and `best_for_record` (a record of a mixed file). The share is
detection seconds / convert seconds; the fastest convert of each checkout is kept with its
share. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import DEFAULT_REALDATA
from harness.table import print_aligned
from harness.trees import headline, measured_tree, tree_env, worktree


def measure(inputs: list[str]) -> dict[str, float]:
    """Convert `inputs` in this process, timing the detection calls inside it."""
    from pipeline import convert
    from pipeline.formats import detect as detection
    from pipeline.stages import normalize

    spent = [0.0]

    def timed(function):  # type: ignore[no-untyped-def]
        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - start

        return wrapper

    normalize.detect = timed(detection.detect)
    normalize.best_for_record = timed(detection.best_for_record)
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        result = convert(inputs, Path(folder) / "threads.jsonl")
        total = time.perf_counter() - start
    account = result.account
    return {
        "seconds": total,
        "detect_seconds": spent[0],
        "records": account.records_read,
        "converted": account.records_converted,
        "formats": len(detection.FORMATS),
    }


def run_child(checkout: Path, inputs: list[str]) -> dict[str, float]:
    """`measure` in a child process importing `pipeline` from `checkout`."""
    command = [sys.executable, str(Path(__file__).resolve()), "--measure", *inputs]
    env = tree_env(checkout)
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"measuring {checkout} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--before", default="HEAD~10", help="the commit to compare with (or a checkout of it)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--realdata", default=str(DEFAULT_REALDATA))
    parser.add_argument("--also", action="append", default=[], help="more input folders")
    parser.add_argument("--measure", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(measure(args.measure)))
        return
    inputs = [args.realdata, *args.also]
    with worktree(args.before) as before:
        best: dict[str, dict[str, float]] = {}
        for _ in range(args.repeat):
            for name, checkout in (("before", before), ("after", measured_tree())):
                figures = run_child(checkout, inputs)
                if name not in best or figures["seconds"] < best[name]["seconds"]:
                    best[name] = figures
    rows = [["checkout", "formats", "records", "converted", "convert s", "detect s", "share"]]
    for name, figures in best.items():
        rows.append(
            [
                f"{name} ({args.before})" if name == "before" else name,
                f"{figures['formats']:.0f}",
                f"{figures['records']:,.0f}",
                f"{figures['converted']:,.0f}",
                f"{figures['seconds']:.2f}",
                f"{figures['detect_seconds']:.3f}",
                f"{figures['detect_seconds'] / figures['seconds']:.1%}",
            ]
        )
    print_aligned(rows)
    share = {n: f["detect_seconds"] / f["seconds"] for n, f in best.items()}
    headline(lower={f"detection share, {name}": value for name, value in share.items()})


if __name__ == "__main__":
    main()
