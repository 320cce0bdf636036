"""pyarrow without its pandas probes (pipeline/arrow_pandas.py): a command that hands
pyarrow no pandas objects builds arrays and converts them to NumPy without importing
pandas; pyarrow knows of pandas again once it is imported, and nanosecond times of an
input become what they always did. Each case runs in its own process: the probes are
made once per process (and this one has imported pandas, tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_arrays_without_pandas_then_pandas_objects_once_it_is_imported() -> None:
    out = run_python(
        """
import sys
import pyarrow as pa
from pipeline.arrow_pandas import skip_pandas_probe
skip_pandas_probe()
lists = pa.array([[1, 2], [3]])
lists.offsets.to_numpy(), lists.values.to_numpy(zero_copy_only=False)
pa.table({"a": [1, None], "b": ["x", None]}).to_pylist()
print("pandas" in sys.modules)
import pandas as pd
print(pa.array(pd.Series([1, None], dtype="Int64")).to_pylist())
print(pa.table(pd.DataFrame({"x": [1.5]})).num_rows)
print(type(pa.scalar(1001, pa.timestamp("ns")).as_py()).__name__)
"""
    )
    assert out.split() == ["False", "[1,", "None]", "1", "Timestamp"]


def test_nanosecond_times_of_a_parquet_input_become_what_they_did(tmp_path: Path) -> None:
    out = run_python(
        f"""
import sys
import pyarrow as pa
import pyarrow.parquet as pq
from pipeline.arrow_pandas import skip_pandas_probe
from pipeline.sources.limits import ReadLimits
from pipeline.sources.tables import iter_parquet
skip_pandas_probe()
path = {str(tmp_path / "times.parquet")!r}
pq.write_table(pa.table({{"at": pa.array([1001], pa.timestamp("ns"))}}), path)
print("pandas" in sys.modules)
(record,) = iter_parquet(path, ReadLimits())
print(record.value["at"])
"""
    )
    assert out.split() == ["False", "1970-01-01T00:00:00.000001001"]


def test_mms_run_of_local_files_imports_no_pandas(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    lines = [
        "name: no-pandas",
        "inputs:",
        f"  - path: {REPO / 'data_samples' / 'openai'}",
        f"output: {tmp_path / 'out'}",
        "stages:",
        "  lint: {fail_on: never}",
        f"  tokenize: {{tokenizer: {REPO / 'configs' / 'sample_tokenizer'}}}",
        "engine: {workers: 1}",
    ]
    config.write_text("\n".join(lines) + "\n")
    out = run_python(
        f"""
import atexit, sys
atexit.register(lambda: print("pandas" in sys.modules))
from pipeline.cli import main
main(["run", {str(config)!r}, "--fresh"])
"""
    )
    assert out.split()[-1] == "False"
