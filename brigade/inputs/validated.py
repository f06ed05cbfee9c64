"""An input document read and validated, through the input cache (a valid input is kept)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from brigade import fs
from brigade.inputs import schemas, sources
from brigade.inputs.cache import cache_dir, write_cache_entry
from brigade.inputs.documents import parse_document, read_bytes


def read_valid_document(path: Path, label: str, schema_tag: str) -> Any:
    """Read a document and validate it against its schema (one-line InputError when not).

    An input that validated before is taken from a cache keyed by the
    digest of its bytes, the schema and brigade's code (sources.code_digest),
    so an unchanged manifest is not parsed and validated again on every resume.
    """
    data = read_bytes(path, label)
    key = hashlib.sha256(
        b"\0".join(
            [
                data,
                path.suffix.lower().encode(),
                schema_tag.encode(),
                json.dumps(schemas.schema(schema_tag), sort_keys=True).encode(),
                sources.code_digest().encode(),
            ]
        )
    ).hexdigest()
    entry = cache_dir() / "inputs" / f"{key}.json"
    try:
        return fs.read_json(entry, limit=None, max_depth=None)
    except (OSError, ValueError):
        pass
    doc = parse_document(data, path, label)
    schemas.check_input(doc, schema_tag, label)
    write_cache_entry(entry, json.dumps(doc, separators=(",", ":")).encode("utf-8"))
    return doc
