"""Screenshots of the HTML reports for the documentation site: runs the quickstart
config in a temporary folder and photographs its `reports/lint.html` and
`reports/stats.html` in headless Chromium (scripts/render_lint_report.py's helpers), as
PNGs under docs/images/.

    python scripts/render_doc_screenshots.py            # writes docs/images/*.png

Exits 1 without writing anything when no Chromium is on PATH (`apt-get install -y
chromium`); the site's pages then show the images the repository holds."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from click.testing import CliRunner  # noqa: E402
from render_lint_report import find_chromium, screenshot  # noqa: E402

from pipeline.cli import main as mms  # noqa: E402

IMAGES = REPO / "docs" / "images"
SHOTS = {
    "lint.html": ("lint-report.png", (1280, 1600)),
    "stats.html": ("stats-report.png", (1280, 1600)),
}
"""Each report page, the image it becomes, and the window (width, height) photographed."""


def render(out: Path) -> list[Path]:
    """Run the quickstart in a scratch folder and photograph its reports into `out`."""
    browser = find_chromium()
    if browser is None:
        raise SystemExit("no chromium on PATH (apt-get install -y chromium): nothing written")
    with tempfile.TemporaryDirectory(prefix="mms-shots-") as scratch:
        work = Path(scratch)
        for name in ("configs", "data_samples"):
            shutil.copytree(REPO / name, work / name)
        result = CliRunner().invoke(
            mms, ["run", str(work / "configs" / "quickstart.yaml"), "-o", str(work / "out")]
        )
        if result.exit_code != 0:
            raise SystemExit(f"the quickstart run failed:\n{result.output}")
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for page, (image, window) in SHOTS.items():
            screenshot(browser, work / "out" / "reports" / page, out / image, window)
            written.append(out / image)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=IMAGES, help="folder of the PNGs")
    args = parser.parse_args(argv)
    for path in render(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
