"""Turn what the user typed (files, directories, globs, `hf:` datasets, and the same on an
object store: `s3://bucket/prefix/`, `s3://bucket/**/*.jsonl`) into the list of inputs to
read."""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pipeline import storage
from pipeline.own_outputs import is_output_folder
from pipeline.sources.batch_files import batch_companions
from pipeline.sources.compression import split_compression
from pipeline.sources.harmony_files import HARMONY_KIND, is_harmony_file
from pipeline.sources.harmony_files import SUFFIX as HARMONY_SUFFIX
from pipeline.sources.names import relative_name, unique_names
from pipeline.sources.stdin import STDIN
from pipeline.sources.text_documents import SKPROMPT_NAME, skprompt_config_path

FILE_KINDS: dict[str, str] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".jsonlines": "jsonl",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".parquet": "parquet",
    ".csv": "csv",
}
"""File suffix -> reader. Any of them may also end in .gz, .zst, .bz2 or .xz (not parquet)."""
TEXT_KINDS: tuple[tuple[str, str], ...] = (
    (".ai.yaml", "ppe"),
    (".ai.yml", "ppe"),
    (SKPROMPT_NAME, "skprompt"),
)
"""File name endings read whole as text (scripts and templates, see text_documents)."""

HF_PREFIX = "hf:"
"""Inputs starting with this name a Hugging Face dataset (Hub id or local directory)."""


class InputError(ValueError):
    """An input path that cannot be used at all (missing, unsupported, matches nothing)."""


@dataclass(slots=True)
class InputFiles:
    """The files to read, in order, and the files a directory walk passed over."""

    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    companions: dict[str, str] = field(default_factory=dict)
    """Files read as part of another (a `config.json` with its `skprompt.txt`)."""
    refused: dict[str, str] = field(default_factory=dict)
    """Files of a folder or glob never opened, with why: not a regular file (a device, a
    pipe), or a symlink whose target lies outside the folder or glob root named."""
    names: dict[str, str] = field(default_factory=dict)
    """Each file's name relative to the input that named it (pipeline/sources/names.py),
    what its threads record instead of the path; an `hf:` dataset and standard input have
    none (they keep their own)."""


def is_hf_input(item: str) -> bool:
    """Whether an input names a Hugging Face dataset (`hf:ORG/NAME`, `hf:./dir`); a URL
    `hf://...` names a file of a Hub repository instead, read like any stored file."""
    return item.startswith(HF_PREFIX) and not storage.is_url(item)


def file_kind(path: str) -> str | None:
    """The reader for a path (`jsonl`, `json`, `yaml`, `parquet`, `csv`, or `ppe` and
    `skprompt` for scripts read whole), or None."""
    base, compression = split_compression(path)
    name = Path(base).name.lower()
    for ending, text_kind in TEXT_KINDS:
        if name.endswith(ending):
            return text_kind
    if name.endswith(HARMONY_SUFFIX):
        return HARMONY_KIND if is_harmony_file(path) else None
    kind = FILE_KINDS.get(Path(base).suffix.lower())
    if kind == "parquet" and compression is not None:
        return None
    return kind


def _supported_list() -> str:
    return ", ".join(sorted(FILE_KINDS))


def _leads_outside(path: str, root: str) -> bool:
    """Whether `path` resolves to a place outside the folder `root` (a symlink out)."""
    real_root = os.path.realpath(root)
    return os.path.commonpath([os.path.realpath(path), real_root]) != real_root


def leads_outside(path: str, root: str) -> bool:
    """Whether `path` resolves (through any symlink, or `..`) to a place outside the folder
    `root`: the rule for the files of a folder input, and for the media a record names
    (pipeline/media/resolve.py)."""
    return _leads_outside(path, root)


def refusal(path: str, root: str) -> str | None:
    """Why a file under `root` must not be opened (not a regular file, or a symlink out of
    `root`), None when it may be."""
    return _refusal(path, root)


def _refusal(path: str, root: str) -> str | None:
    """Why a data file found under `root` must not be opened, or None: it is not a
    regular file, or it resolves to a place outside `root` (a symlink out)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        return f"cannot be opened: {err.strerror or err}"
    if not stat.S_ISREG(mode):
        return "not a regular file (a device, pipe or socket)"
    if _leads_outside(path, root):
        return f"a symlink leading outside {root}"
    return None


def _refused_folder(path: str, root: str, found: InputFiles) -> bool:
    """Whether a folder met under `root` is a symlink that must not be followed out of
    it (then recorded as refused)."""
    if os.path.islink(path) and _leads_outside(path, root):
        found.refused[path] = f"a symlink leading outside {root}"
        return True
    return False


OUTPUT_FOLDER = "an mms output folder (its manifest or work directory is there): never an input"
"""Why a folder walk leaves out a folder an mms command wrote as its output."""


def _walkable(path: str, root: str, found: InputFiles) -> bool:
    """Whether a folder walk goes into the subfolder `path`: not hidden, not a symlink
    (one inside `root` is walked where it really is; one out is refused), and not an mms
    output folder (refused: its shards and reports are an earlier output, not data)."""
    if Path(path).name.startswith("."):
        return False
    if _refused_folder(path, root, found) or os.path.islink(path):
        return False
    return not _output_folder(path, found)


def _output_folder(path: str, found: InputFiles) -> bool:
    """Whether a folder met in a walk or glob is an mms output folder (then refused)."""
    if is_output_folder(Path(path)):
        found.refused[path] = OUTPUT_FOLDER
        return True
    return False


def _add_found(path: str, root: str, found: InputFiles) -> None:
    """A file of a folder walk or glob: read, skipped (not a data file) or refused."""
    if not file_kind(path):
        found.skipped.append(path)
        return
    refusal = _refusal(path, root)
    if refusal is None:
        found.files.append(path)
    else:
        found.refused[path] = refusal


def _walk(directory: str, found: InputFiles, root: str | None = None) -> None:
    """The files under `directory` (sorted, hidden entries skipped, folder symlinks not
    followed, and refused when they lead outside); `root` is what the user named
    (default: the directory)."""
    root = root or directory
    for current, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if _walkable(Path(current, d).as_posix(), root, found))
        for name in sorted(files):
            if not name.startswith("."):
                _add_found(Path(current, name).as_posix(), root, found)


def _glob_names(folder: Path, part: str) -> list[str]:
    """The names in `folder` matching the pattern component `part`; a hidden name only
    when `part` starts with a dot, as glob does."""
    try:
        with os.scandir(folder) as entries:
            names = [entry.name for entry in entries]
    except OSError:
        return []
    shown = part.startswith(".")
    return [n for n in names if fnmatch.fnmatchcase(n, part) and (shown or n[0] != ".")]


def _subfolders(folder: Path, root: str, found: InputFiles) -> list[Path]:
    """The folders `**` goes into below `folder`, as a folder walk would: not hidden, not
    symlinks (so a cycle of links cannot make a glob endless)."""
    try:
        with os.scandir(folder) as entries:
            subfolders = [folder / entry.name for entry in entries if entry.is_dir()]
    except OSError:
        return []
    return [sub for sub in subfolders if _walkable(sub.as_posix(), root, found)]


def _glob(pattern: str, root: str, found: InputFiles) -> list[str]:
    """The paths matching `pattern` (files and folders, sorted), as glob.glob with `**`
    finds them, except that `**` never follows a folder symlink and no folder symlink
    leading outside `root` is followed (it is refused)."""
    parts = Path(pattern).parts[len(Path(root).parts) :]
    folders_only = pattern.endswith("/")
    matches: set[str] = set()
    stack, seen = [(Path(root), 0)], set()
    while stack:
        folder, index = stack.pop()
        if (folder, index) in seen:
            continue
        seen.add((folder, index))
        if index == len(parts):
            if not folders_only or os.path.isdir(folder):
                matches.add(folder.as_posix())
            continue
        part = parts[index]
        if part == "**":
            stack.append((folder, index + 1))
            stack.extend((sub, index) for sub in _subfolders(folder, root, found))
            continue
        names = _glob_names(folder, part) if glob.has_magic(part) else [part]
        for name in names:
            path = folder / name
            last = index + 1 == len(parts)
            if os.path.isdir(path):
                if not _refused_folder(path.as_posix(), root, found):
                    stack.append((path, index + 1))
            elif last and os.path.lexists(path):
                stack.append((path, index + 1))
    return sorted(matches)


def _glob_root(pattern: str) -> str:
    """The folder a glob pattern cannot leave: its leading parts without wildcards."""
    parts = Path(pattern).parts
    fixed = []
    for part in parts:
        if glob.has_magic(part):
            break
        fixed.append(part)
    return str(Path(*fixed)) if fixed else "."


def _set_companions_aside(found: InputFiles) -> None:
    """A `config.json` beside a `skprompt.txt` is read with it, not as a record; so is the
    Batch API request file an output file answers (pipeline/sources/batch_files.py)."""
    listed = set(found.files)
    for path in found.files:
        if file_kind(path) == "skprompt":
            config = skprompt_config_path(path)
            if config in listed:
                found.companions[config] = path
    found.companions.update(batch_companions(found.files))
    found.files = [path for path in found.files if path not in found.companions]


def _once_each(refused: dict[str, str]) -> dict[str, str]:
    """The refused paths with each entry (a link, a device) listed once, by its shortest
    path, however many folder symlinks inside the root lead to it."""
    shortest: dict[str, str] = {}
    for path in refused:
        key = os.path.join(os.path.realpath(os.path.dirname(path) or "."), os.path.basename(path))
        if key not in shortest or len(path) < len(shortest[key]):
            shortest[key] = path
    kept = set(shortest.values())
    return {path: why for path, why in refused.items() if path in kept}


def _hidden_below(url: str, root: str) -> bool:
    """Whether a stored file lies in a hidden folder (or is hidden) below the prefix `root`."""
    rest = url[len(root.rstrip("/")) :] if url.startswith(root.rstrip("/")) else url
    return any(piece.startswith(".") for piece in rest.split("/") if piece)


def _add_stored(url: str, root: str, found: InputFiles) -> None:
    """A file of a stored folder or glob: read, or skipped (hidden, or not a data file)."""
    if _hidden_below(url, root):
        return
    if file_kind(url):
        found.files.append(url)
    else:
        found.skipped.append(url)


def _walk_order(urls: list[str], root: str) -> list[str]:
    """The files under the prefix `root` in the order a local folder walk gives them:
    names sorted, and a folder's own files before its subfolders'."""

    def key(url: str) -> list[tuple[int, str]]:
        pieces = url[len(root.rstrip("/")) :].strip("/").split("/")
        return [(1, piece) for piece in pieces[:-1]] + [(0, pieces[-1])]

    return sorted(urls, key=key)


def _expand_url(item: str, found: InputFiles) -> str:
    """Add the files of a URL input to `found`: a glob (`*`, `?`, `[...]`, `**`), a folder
    (every file under the prefix, sorted, hidden entries skipped) or one file; returns the
    prefix they lie under (the glob's fixed leading part, the folder, the file's folder).
    Stores have no links or devices: nothing is refused."""
    if glob.has_magic(item.split("://", 1)[1]):
        pieces = item.split("/")
        fixed = next(i for i, piece in enumerate(pieces) if glob.has_magic(piece))
        root = "/".join(pieces[:fixed])
        matches = storage.glob(item)
        if not matches:
            raise InputError(f"{item}: no files match this pattern")
        for url, is_folder in matches:
            if is_folder:
                for inner in _walk_order(storage.find(url), url):
                    _add_stored(inner, root, found)
            else:
                _add_stored(url, root, found)
        return root
    if storage.isfile(item):
        if file_kind(item) is None:
            raise InputError(
                f"{item}: unsupported file type (supported: {_supported_list()}, "
                "optionally compressed .gz/.zst/.bz2/.xz)"
            )
        found.files.append(item)
        return storage.parent(item)
    if storage.isdir(item):
        for url in _walk_order(storage.find(item), item):
            _add_stored(url, item, found)
        return item.rstrip("/")
    raise InputError(f"{item}: no such file or folder in the store")


def expand_inputs(inputs: list[str] | tuple[str, ...]) -> InputFiles:
    """Expand inputs in the order given: directories recursively (sorted, hidden entries
    skipped), globs sorted (`**` recurses); `hf:` datasets are kept as they are, never
    globbed; URLs of an object store are expanded the same way on the store. A file or
    dataset listed twice is read once."""
    found = InputFiles()
    named: list[tuple[int, str, str]] = []  # (input position, path, name under its root)
    for position, item in enumerate(inputs):
        before = len(found.files)
        root = _expand(item, found)
        if root is not None:
            named.extend(
                (position, path, relative_name(path, root)) for path in found.files[before:]
            )
    seen: set[str] = set()
    unique = []
    for path in found.files:
        local = not (is_hf_input(path) or path == STDIN or storage.is_url(path))
        key = os.path.realpath(path) if local else path
        if key not in seen:
            seen.add(key)
            unique.append(path)
    found.files = unique
    found.refused = _once_each(found.refused)
    _set_companions_aside(found)
    found.names = _names_of(named, found.files)
    if not found.files:
        refused = "".join(f"; refused {path}: {why}" for path, why in found.refused.items())
        raise InputError(
            f"no readable input files in {' '.join(inputs)} (supported: {_supported_list()})"
            + refused
        )
    return found


def _names_of(named: list[tuple[int, str, str]], files: list[str]) -> dict[str, str]:
    """The names of `files` (those read) from (input position, path, name) in input
    order: the first entry of each path, collisions qualified (names.unique_names)."""
    kept, first = set(files), dict[str, tuple[int, str, str]]()
    for entry in named:
        if entry[1] in kept:
            first.setdefault(entry[1], entry)
    entries = list(first.values())
    names = unique_names((position, name) for position, _, name in entries)
    return {path: name for (_, path, _), name in zip(entries, names, strict=True)}


def _expand(item: str, found: InputFiles) -> str | None:
    """Add the files of one input to `found`; the folder their names are relative to
    (None for an `hf:` dataset and standard input, which keep their own names)."""
    if is_hf_input(item) or item == STDIN:
        found.files.append(item)
        return None
    if storage.is_url(item):
        return _expand_url(item, found)
    if os.path.isdir(item):
        _walk(item, found)
        return item
    if os.path.exists(item):
        if not os.path.isfile(item):
            raise InputError(f"{item}: not a regular file (a device, pipe or socket)")
        if file_kind(item) is None:
            raise InputError(
                f"{item}: unsupported file type (supported: {_supported_list()}, "
                "optionally compressed .gz/.zst/.bz2/.xz)"
            )
        found.files.append(Path(item).as_posix())
        return os.path.dirname(item)
    if glob.has_magic(item):
        root = _glob_root(item)
        refused_before = len(found.refused)
        matches = _glob(item, root, found)
        if not matches and len(found.refused) == refused_before:
            raise InputError(f"{item}: no files match this pattern")
        for match in matches:
            if os.path.isdir(match):
                if not _output_folder(match, found):
                    _walk(match, found, root)
            else:
                _add_found(Path(match).as_posix(), root, found)
        return root
    raise InputError(f"{item}: no such file or directory")
