"""brigade's own files: the schema files it ships and the digest of its code.

Every cache that holds what brigade's code computed is keyed on `code_digest`,
so an edited module or schema is never answered from an older one's cache.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]


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
    """sha256 over brigade's sources and schema files, computed once per process.

    Reading its sixty-odd small files costs about a millisecond, so every
    no-op resume can afford it.
    """
    digest = hashlib.sha256()
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
