"""pyarrow without its pandas probes. pyarrow imports pandas (0.15 to 0.25 s) the first
time it builds an array from Python values, whatever the constructor, only to ask whether
they are pandas objects, and again the first time it converts an array to NumPy, to keep
pandas' NA, NaT and Timestamp for recognizing them among Python values. A command that
hands pyarrow no pandas objects calls `skip_pandas_probe()` first: pyarrow then makes both
probes with pandas absent. The first (pyarrow.lib's) is made again the moment anything
imports pandas; the second (in C++) never is, so a process that may hand pyarrow pandas
objects (datasets, Ray, a curator's plugin) must not call it.

pyarrow also asks the first when a nanosecond timestamp or duration becomes a Python value
(a pandas Timestamp or Timedelta when it knows of pandas, else a datetime that cannot hold
the nanoseconds): `pandas_for(schema)`, before rows of a file this tool did not write
become Python values, imports pandas when the schema holds such a type, so they become
what they always did.

pyarrow keeps what it found in a private object (`pyarrow.lib._pandas_api`); with a
pyarrow that has none, both functions do nothing."""

from __future__ import annotations

import importlib.util
import sys
from contextlib import suppress
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pyarrow as pa

PANDAS = "pandas"


def skip_pandas_probe() -> None:
    """Make pyarrow find pandas absent when it looks (module docstring), unless pandas is
    imported already or pyarrow is not. Call it at the start of a command, in one thread,
    before any array is built."""
    if PANDAS in sys.modules or "pyarrow.lib" not in sys.modules:
        return
    shim = _shim()
    if shim is None:
        return
    finder = _PandasImport()
    sys.meta_path.insert(0, finder)
    finder.refuse = True
    try:
        # both probes, made now that pandas is absent: the array's and the conversion's
        sys.modules["pyarrow.lib"].array([0]).to_numpy()
    finally:
        finder.refuse = False


def pandas_for(schema: pa.Schema) -> None:
    """Import pandas (when installed) if values of `schema` hold a nanosecond timestamp or
    duration, before they become Python values (module docstring)."""
    if PANDAS in sys.modules or not any(_nanoseconds(field.type) for field in schema):
        return
    with suppress(ImportError):
        importlib.import_module(PANDAS)


def _nanoseconds(kind: pa.DataType) -> bool:
    """Whether `kind`, or a type nested in it, is a nanosecond timestamp or duration."""
    import pyarrow as pa

    if pa.types.is_timestamp(kind) or pa.types.is_duration(kind):
        return bool(kind.unit == "ns")
    if pa.types.is_dictionary(kind):
        return _nanoseconds(kind.value_type)
    if isinstance(kind, pa.ExtensionType):
        return _nanoseconds(kind.storage_type)
    return any(_nanoseconds(kind.field(index).type) for index in range(kind.num_fields))


def _shim() -> Any:
    """pyarrow's record of pandas, None when this pyarrow has none."""
    lib = sys.modules.get("pyarrow.lib")
    shim = getattr(lib, "_pandas_api", None)
    kind = type(shim)  # its properties asked of the type: asking `pd` imports pandas
    return shim if hasattr(kind, "have_pandas") and hasattr(kind, "pd") else None


class _PandasImport(MetaPathFinder):
    """Refuses pandas while `refuse` (pyarrow's probe), then waits for pandas to be
    imported and has pyarrow look for it again (asking for `pd` makes it import pandas,
    found in sys.modules by then). Leaves sys.meta_path at the first import of pandas,
    installed or not."""

    refuse = False

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: object = None
    ) -> ModuleSpec | None:
        if fullname != PANDAS:
            return None
        if self.refuse:
            raise ModuleNotFoundError(f"No module named {PANDAS!r}", name=PANDAS)
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(PANDAS)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: object) -> None:
            execute(module)  # type: ignore[arg-type]
            # pyarrow imports pandas (done) and its pandas_compat; a pandas it refuses
            # (too old) it warned of before, and uses no more than then
            with suppress(Exception):
                _shim().pd  # noqa: B018

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
