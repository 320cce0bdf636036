"""Run a benchmark script on another commit and on this tree, side by side: the same script
(this tree's file), the same interpreter and inputs, `pipeline` imported from a git
worktree of COMMIT or from this tree by PYTHONPATH, the two alternating --repeat times.

Run from the repository root:

    python benchmarks/side_by_side.py 4307856 -- convert.py --size-mb 100 --workers 1,2
    python benchmarks/side_by_side.py HEAD~5 --repeat 3 -- small_job.py --repeat 1

For each tree it reports the script's whole run (wall and CPU seconds, its largest
process's peak RSS, from `wait4`) and the headline figures the script hands over
(harness/trees.py's `headline`): the best of the rounds of each (the least for seconds and
memory, the most for rates and ratios), and this tree's over the other's. Every run's
output is kept in the work folder's logs. Timings are reported, never asserted; the exit
status is 1 when a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from harness import BENCHMARKS
from harness.options import add_run, fail, work_folder, write_json
from harness.procs import load_average, run_child, tail
from harness.table import print_aligned
from harness.trees import FIGURES_ENV, commit_of, measured_tree, tree_env, worktree


def run_tree(script: list[str], tree: Path, log: Path, figures: Path) -> dict[str, Any]:
    """One run of the script importing `pipeline` from `tree`: its figures."""
    figures.unlink(missing_ok=True)
    env = {**tree_env(tree), FIGURES_ENV: str(figures)}
    run = run_child(tree.name, [sys.executable, *script], log, env=env, cwd=tree)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(script)} on {tree} exited {run.returncode}:\n{tail(log)}")
    found = json.loads(figures.read_text()) if figures.exists() else {"lower": {}, "higher": {}}
    found["lower"] |= {
        "script wall s": run.seconds,
        "script CPU s": run.cpu_seconds,
        "largest process peak RSS MiB": run.peak_rss_mb,
    }
    return dict(found)


def best(rounds: list[dict[str, Any]]) -> dict[str, float]:
    """Each figure's best over the rounds: the least of `lower`, the most of `higher`."""
    found: dict[str, float] = {}
    for side, pick in (("lower", min), ("higher", max)):
        for name in rounds[0][side]:
            found[name] = pick(r[side][name] for r in rounds if name in r[side])
    return found


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commit", help="the other commit (or a checkout of it)")
    add_run(parser, repeat=2)
    args = parser.parse_args(argv[:split])
    script = argv[split + 1 :]
    if not script or not (BENCHMARKS / script[0]).is_file():
        parser.error("name a script of benchmarks/ after `--`, with its options")
    script[0] = str(BENCHMARKS / script[0])
    results: dict[str, list[dict[str, Any]]] = {}
    load_before = load_average()
    with work_folder(args.workdir) as workdir, worktree(args.commit) as other:
        trees = {
            f"{commit_of(other)}": other,
            f"this tree ({commit_of(measured_tree())})": measured_tree(),
        }
        try:
            for attempt in range(1, args.repeat + 1):
                for number, (label, tree) in enumerate(trees.items()):
                    print(f"round {attempt}/{args.repeat}: {label} ...", flush=True)
                    log = workdir / f"tree{number}-round{attempt}.log"
                    found = run_tree(script, tree, log, workdir / "figures.json")
                    results.setdefault(label, []).append(found)
        except RuntimeError as err:
            return fail([str(err)])
    before, after = (best(rounds) for rounds in results.values())
    lines = [("figure", *results, "ratio")]
    for name, value in before.items():
        if name in after:
            ratio = f"{after[name] / value:.2f}" if value else ""
            lines.append((name, f"{value:,.3f}", f"{after[name]:,.3f}", ratio))
    print(f"\n{' '.join(Path(script[0]).name.split() + script[1:])}, best of {args.repeat} each:")
    print_aligned(lines)
    print(f"load average before {load_before}, after {load_average()}; cpus {os.cpu_count()}")
    write_json(args.json, {"script": script, "rounds": results, "best": [before, after]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
