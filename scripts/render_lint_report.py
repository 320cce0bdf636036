"""Lint a path, write its HTML report, and screenshot the page with headless Chromium, to
look at the report as a curator would (tests/test_lint_html.py reuses the Chromium helpers).

    python scripts/render_lint_report.py ../shared/realdata --html /tmp/report.html --png /tmp/report.png
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pipeline.jobs.lint import lint
from pipeline.lint.reports.html import write_html

CHROMIUM_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
TIMEOUT_SECONDS = 60
WINDOW = (1280, 2400)


def find_chromium() -> str | None:
    """The Chromium executable on PATH, if any."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def run_chromium(browser: str, *args: str) -> str:
    """Run headless Chromium with a throwaway profile and no background network; its stdout."""
    with tempfile.TemporaryDirectory(prefix="mms-chromium-") as profile:
        done = subprocess.run(
            [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited with {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def dump_dom(browser: str, url: str) -> str:
    """The page's DOM after load (scripts run), serialized."""
    return run_chromium(browser, "--dump-dom", url)


def screenshot(browser: str, html: Path, png: Path, window: tuple[int, int] = WINDOW) -> None:
    """A PNG of the page's first `window` pixels."""
    run_chromium(
        browser,
        f"--screenshot={png}",
        f"--window-size={window[0]},{window[1]}",
        html.resolve().as_uri(),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="file, folder or glob to lint")
    parser.add_argument("--html", type=Path, default=Path("report.html"))
    parser.add_argument("--png", type=Path, help="screenshot path (default: next to --html)")
    parser.add_argument("--height", type=int, default=WINDOW[1], help="window height in pixels")
    args = parser.parse_args(argv)
    png = args.png or args.html.with_suffix(".png")
    report = lint(args.path)
    with args.html.open("w", encoding="utf-8") as out:
        write_html(report, out)
    print(f"report:     {args.html}")
    browser = find_chromium()
    if browser is None:
        print("no chromium on PATH: screenshot skipped", file=sys.stderr)
        return 1
    screenshot(browser, args.html, png, (WINDOW[0], args.height))
    print(f"screenshot: {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
