"""brigade's own files: the schema files it ships and the digest of its code.

Every cache that holds what brigade's code computed is keyed on `code_digest`,
so an edited module or schema, or another version of a library brigade runs on,
is never answered from an older one's cache.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]

# the libraries whose answers brigade's caches hold (parsed and validated inputs, compiled
# validators, patterns checked and searched, grades): (module, distribution)
LIBRARIES = (
    ("yaml", "pyyaml"),
    ("jsonschema", "jsonschema"),
    ("fastjsonschema", "fastjsonschema"),
    ("regex", "regex"),
    ("defusedxml", "defusedxml"),
    ("ahocorasick", "pyahocorasick"),
)


@functools.cache
def schema_folder() -> Path:
    """Where the schema files are: package data beside the modules in an installed wheel
    (brigade/schema_files/), the top-level schemas/ of a source checkout (an editable
    install maps brigade.schema_files there) otherwise."""
    installed = PACKAGE / "schema_files"
    if installed.is_dir():
        return installed
    # (importlib.resources names the folder of a package without __init__.py by a
    # MultiplexedPath, whose str() is no path: an installed wheel found no schema)
    return PACKAGE.parent / "schemas"


def schema_text(name: str) -> str:
    """The text of one schema file."""
    return (schema_folder() / name).read_text("utf-8")


@functools.cache
def code_digest() -> str:
    """sha256 over brigade's sources and schema files, the interpreter, and the versions
    of the libraries it runs on (`library_versions`), computed once per process.

    Reading its hundred-odd small files and the libraries' folders costs about two
    milliseconds, so every no-op resume can afford it.
    """
    digest = hashlib.sha256()
    # the interpreter answers too: its re (a grader's pattern is compiled with it first),
    # its json, its Unicode tables (the text of a warning)
    digest.update(f"{sys.implementation.cache_tag}\0{sys.version}\0".encode())
    digest.update("\0".join(library_versions()).encode() + b"\0")
    for folder, names, files in os.walk(PACKAGE):
        names[:] = sorted(name for name in names if name != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                _add(digest, os.path.join(folder, name), os.path.relpath(folder, PACKAGE))
    schemas = schema_folder()
    try:
        names = sorted(name for name in os.listdir(schemas) if name.endswith(".json"))
    except OSError:
        names = []
    for name in names:
        _add(digest, os.path.join(schemas, name), "schemas")
    return digest.hexdigest()


def _add(digest: hashlib._Hash, path: str, label: str) -> None:
    with open(path, "rb") as handle:
        data = handle.read()
    digest.update(f"{label}/{os.path.basename(path)}\0{len(data)}\0".encode() + data)


def library_versions() -> list[str]:
    """The installed metadata folder of each of `LIBRARIES` (`regex-2024.11.6.dist-info`:
    its name carries the version), found beside the module without importing it; when it
    has none (a source tree on the path, a zip), its files' stats (`_unversioned`);
    `name:missing` when the module is not there."""
    found: list[str] = []
    listed: dict[str, list[str]] = {}
    for module, distribution in LIBRARIES:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
        if spec is None or not origin:
            found.append(f"{distribution}:missing")
            continue
        # a package's origin is its __init__.py: the metadata is beside the package's folder
        inside = os.path.dirname(origin)
        folder = os.path.dirname(inside) if spec.submodule_search_locations else inside
        if folder not in listed:
            try:
                listed[folder] = sorted(os.listdir(folder))
            except OSError:
                listed[folder] = []
        names = [name for name in listed[folder] if _metadata_of(name, distribution)]
        package = inside if spec.submodule_search_locations else None
        found.append(f"{distribution}:{','.join(names) or _unversioned(origin, package)}")
    return found


def _unversioned(origin: str, package: str | None) -> str:
    """A library with no metadata beside it (a source tree on the path, a zip): its path
    and the size, time and inode of each of its files (the package folder's, walked; else
    the module's, or the nearest path that exists: a zip archive), so an edit where it
    sits is another version."""
    parts = [origin]
    if package is not None and os.path.isdir(package):
        for folder, names, files in os.walk(package):
            names[:] = sorted(name for name in names if name != "__pycache__")
            parts.extend(_stamp(os.path.join(folder, name)) for name in sorted(files))
        return "|".join(parts)
    path = origin
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    parts.append(_stamp(path))
    return "|".join(parts)


def _stamp(path: str) -> str:
    try:
        info = os.stat(path)
    except OSError:
        return f"{path}:gone"
    return f"{path}:{info.st_size}:{info.st_mtime_ns}:{info.st_ino}"


def _metadata_of(name: str, distribution: str) -> bool:
    """Whether `name` is a metadata folder of `distribution` (`PyYAML-6.0.2.dist-info`)."""
    if not name.endswith((".dist-info", ".egg-info")):
        return False
    project = name.partition("-")[0]
    return _normalized(project) == _normalized(distribution)


def _normalized(name: str) -> str:
    """A distribution's name compared as PEP 503 does (case, runs of `-_.`)."""
    return re.sub(r"[-_.]+", "_", name).lower()
