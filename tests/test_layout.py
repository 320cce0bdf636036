"""The package's floors (DESIGN §2), kept true by reading every module's imports: no import
loop between modules nor between the packages below `pipeline` (a package that imports
another is beneath it, never also above), nothing below the package root imports the
root, and each package imports only the floors beneath it (the engine nothing of inputs,
formats, rules or tokenizers; stages no engine, job or CLI; lint and tokenize nothing that
reads files). No module is longer than a reader takes in at once (MAX_LINES)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "pipeline"

DRIVERS = ("pipeline.jobs", "pipeline.engine", "pipeline.cli")
"""The top floors: what runs stages (jobs, engines) and what calls them (the CLI)."""
SIDES = ("pipeline.stages", "pipeline.output", "pipeline.loader")
"""The floor beneath them: stages, sinks, and the trainer side."""
DOMAIN = ("pipeline.formats", "pipeline.lint", "pipeline.tokenize")
"""The domain packages, which never import each other."""

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "pipeline.mms": ("pipeline.",),
    "pipeline.config_slice": ("pipeline.",),
    "pipeline.sources": (*DRIVERS, *SIDES, *DOMAIN),
    "pipeline.templates": (*DRIVERS, *SIDES, *DOMAIN),
    "pipeline.dedup": (*DRIVERS, *SIDES, *DOMAIN),
    "pipeline.curation": (*DRIVERS, *SIDES, *DOMAIN, "pipeline.sources"),
    "pipeline.packing": (*DRIVERS, *SIDES, *DOMAIN, "pipeline.sources"),
    "pipeline.formats": (*DRIVERS, *SIDES, *DOMAIN),
    "pipeline.lint": (*DRIVERS, *SIDES, *DOMAIN, "pipeline.sources"),
    "pipeline.tokenize": (*DRIVERS, *SIDES, *DOMAIN, "pipeline.sources"),
    "pipeline.objectives": (*DRIVERS, *SIDES, "pipeline.formats", "pipeline.lint"),
    "pipeline.stages": (*DRIVERS, "pipeline.output", "pipeline.loader"),
    "pipeline.output": (*DRIVERS, "pipeline.stages"),
    "pipeline.loader": (*DRIVERS, "pipeline.stages"),
    "pipeline.engine": (
        "pipeline.jobs",
        "pipeline.cli",
        "pipeline.sources",
        "pipeline.stages",
        "pipeline.loader",
        *DOMAIN,
    ),
    "pipeline.jobs": ("pipeline.cli",),
}
"""What each package may never import (a prefix of a module name)."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """The pipeline modules a module imports (anywhere in it, type-checking imports too):
    `from a.b import c` names `a.b.c` when that is a module, else `a.b`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path.parent)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {name for name in found if name == "pipeline" or name.startswith("pipeline.")}


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}
GRAPH = {name: imports_of(path) for name, path in MODULES.items()}


def test_no_module_below_the_root_imports_the_root() -> None:
    upward = sorted(
        name for name, found in GRAPH.items() if name != "pipeline" and "pipeline" in found
    )
    assert upward == []


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_each_floor_imports_only_what_is_beneath_it(package: str) -> None:
    crossings = sorted(
        f"{name} imports {target}"
        for name, found in GRAPH.items()
        if name == package or name.startswith(package + ".")
        for target in found
        if not target.startswith(package)
        and any(target == banned or target.startswith(banned) for banned in FORBIDDEN[package])
    )
    assert crossings == []


def loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import loops of a graph: Tarjan's strongly connected components with two
    members or more, each sorted (an edge to a name outside the graph is left out)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def package_of(module: str) -> str:
    """The package (or module) right below `pipeline` that a module belongs to."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The imports between the packages (and modules) right below `pipeline`: one edge per
    package that some module of one imports a module of, top-level and function-level
    imports alike (the root itself, which re-exports the API, is left out)."""
    packages: dict[str, set[str]] = {}
    for name, found in graph.items():
        if name == "pipeline":
            continue
        edges = packages.setdefault(package_of(name), set())
        edges.update(package_of(target) for target in found if target != "pipeline")
    for name, edges in packages.items():
        edges.discard(name)
    return packages


def test_no_import_loop() -> None:
    assert loops(GRAPH) == []


def test_no_import_loop_between_packages() -> None:
    """A package that imports another never is imported by it, even through a third: what
    two packages share lives in a floor beneath both."""
    graph = package_graph(GRAPH)
    assert {"pipeline.stages", "pipeline.media", "pipeline.dedup"} <= graph.keys()
    found = loops(graph)
    within = [
        f"{name} imports {target}"
        for name, imported in sorted(GRAPH.items())
        for target in sorted(imported)
        for loop in found
        if package_of(name) != package_of(target)
        and {package_of(name), package_of(target)} <= set(loop)
    ]
    assert found == [], "the imports within the loops:\n" + "\n".join(within)


def test_the_loop_finder_finds_a_loop_between_packages() -> None:
    graph = {
        "pipeline.a.x": {"pipeline.b.y"},
        "pipeline.b.y": {"pipeline.c"},
        "pipeline.c": {"pipeline.a"},
        "pipeline.a": set(),
        "pipeline.d": {"pipeline.a.x"},
    }
    assert loops(package_graph(graph)) == [["pipeline.a", "pipeline.b", "pipeline.c"]]
    assert loops(graph) == []


MAX_LINES = 600
"""The longest a module of the package may be: past it, a module does more than one job."""


def test_no_module_is_longer_than_max_lines() -> None:
    long = sorted(
        f"{name}: {lines} lines"
        for name, path in MODULES.items()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    )
    assert long == []
