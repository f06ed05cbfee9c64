"""The one reader of JSON brigade did not write: every problem is one BadJSON line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brigade import fs
from brigade.core import jsontext
from brigade.outdir import store


@pytest.mark.parametrize(
    ("data", "kind", "problem"),
    [
        ("[" * 200000, "depth", "nested deeper than 200 levels"),
        ("[" * 300 + "]" * 300, "depth", "nested deeper than 200 levels"),
        ('{"a": ' * 201 + "1" + "}" * 201, "depth", "nested deeper than 200 levels"),
        (b'{"a": "\xff"}', "encoding", "not UTF-8 (byte 7)"),
        ("[NaN]", "syntax", "not JSON (NaN is no JSON number)"),
        ("-Infinity", "syntax", "not JSON (-Infinity is no JSON number)"),
        ("[1,", "syntax", "not JSON (Expecting value: line 1 column 4 (char 3))"),
        ("1" * 5000, "syntax", None),  # an integer too long to convert
    ],
)
def test_what_is_refused_and_how(data: str | bytes, kind: str, problem: str | None) -> None:
    with pytest.raises(jsontext.BadJSON) as caught:
        jsontext.parse(data)
    assert caught.value.kind == kind
    if problem is not None:
        assert str(caught.value) == problem
    assert "\n" not in str(caught.value)


def test_the_size_cap() -> None:
    with pytest.raises(jsontext.BadJSON, match="^larger than 10 bytes$"):
        jsontext.parse(b"[1, 2, 3, 4, 5]", limit=10)
    assert jsontext.parse(b"[1, 2, 3, 4, 5]", limit=None) == [1, 2, 3, 4, 5]


def test_brackets_inside_strings_are_no_nesting() -> None:
    text = json.dumps(["[" * 500, {"k\\\"[": ["\\\\", "{{{"]}])
    assert jsontext.parse(text, max_depth=3) == json.loads(text)
    with pytest.raises(jsontext.BadJSON):
        jsontext.parse(text, max_depth=2)
    assert jsontext.too_deep(b"[[[]]]", 2) and not jsontext.too_deep(b"[[[]]]", 3)


def test_no_depth_cap_still_refuses_what_the_parser_cannot_nest() -> None:
    assert jsontext.parse("[" * 300 + "]" * 300, max_depth=None) is not None
    with pytest.raises(jsontext.BadJSON) as caught:
        jsontext.parse("[" * 200000, max_depth=None)
    assert caught.value.kind == "depth"


def test_store_read_json_never_crashes(tmp_path: Path) -> None:
    path = tmp_path / "cell.json"
    for data in (b"[" * 200000, b"\xff\xfe", b"[NaN]", b""):
        path.write_bytes(data)
        assert store.read_json(path) is None
    path.write_bytes(b'{"a": [1]}')
    assert store.read_json(path) == {"a": [1]}
    link = tmp_path / "link.json"
    link.symlink_to(path)
    assert store.read_json(link) is None  # never followed


def test_an_atomic_write_that_fails_leaves_no_temp_file(tmp_path: Path) -> None:
    (tmp_path / "final.txt").mkdir()
    with pytest.raises(IsADirectoryError) as caught:
        fs.atomic_write(tmp_path / "final.txt", b"answer")
    assert caught.value.filename == str(tmp_path / "final.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final.txt"]


def test_an_atomic_write_replaces_a_link_and_never_writes_through_one(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"mine")
    run = tmp_path / "run"
    run.mkdir()
    (run / "final.txt").symlink_to(victim)
    fs.atomic_write(run / "final.txt", b"answer")
    assert victim.read_bytes() == b"mine"
    assert not (run / "final.txt").is_symlink()
    # a link on the way to a folder made under a root: refused, nothing written anywhere
    (tmp_path / "elsewhere").mkdir()
    (run / "changes").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        fs.folder_in(run, ["changes", "x"])
    assert list((tmp_path / "elsewhere").iterdir()) == []
