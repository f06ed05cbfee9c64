"""Output directories restored from a copy (new inodes and ctimes: `cp -a`, a tarball, a CI
cache) or moved to another path: their content decides what runs and what is written.

A copy with identical files runs nothing and rewrites nothing (every file's mtime stays);
a receipt whose bytes changed is noticed even when its size and mtime are as they were.
"""

from __future__ import annotations

import html
import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import BATTERY_STATES, Project

from brigade.core.projection import find_leaks_in_text, make_secrets
from brigade.outdir import caches
from brigade.outdir.export import clean_here
from brigade.report.pages import case_page, cell_page, shard_width


def mtimes(out: Path) -> dict[str, int]:
    """Every file's mtime_ns under the output directory, but its caches and doit's DB."""
    found = {}
    for root, _, names in os.walk(out):
        for name in names:
            path = Path(root) / name
            relative = path.relative_to(out).as_posix()
            if not relative.startswith("."):  # (the caches: .receipt-index.json, ...)
                found[relative] = path.stat().st_mtime_ns
    return found


def settled(project: Project) -> None:
    """A second run of the finished battery: everything written that a resume writes."""
    assert project.run().returncode == 3


def restore_copy(project: Project) -> None:
    """Replace the output directory by a `cp -a` copy of itself (same path, new inodes)."""
    aside = project.root / "aside"
    project.out.rename(aside)
    subprocess.run(["cp", "-a", str(aside), str(project.out)], check=True)
    shutil.rmtree(aside)


def changed(before: dict[str, int], after: dict[str, int]) -> set[str]:
    return {name for name, mtime in after.items() if before.get(name) != mtime}


def pages_listing(cell_id: str) -> set[str]:
    """The report files that show a cell of case `ok`: its page, its case's page, the
    index and junit.xml (what an edit of that one cell may rewrite)."""
    width = shard_width(len(BATTERY_STATES))
    return {
        f"report/index_files/{cell_page(cell_id, width)}",
        f"report/index_files/{case_page('ok', width)}",
        "report/index.html",
        "report/junit.xml",
    }


def test_a_copied_directory_runs_and_rewrites_nothing(finished_battery: Project) -> None:
    settled(finished_battery)
    launches = finished_battery.launches()
    restore_copy(finished_battery)
    before = mtimes(finished_battery.out)
    assert finished_battery.run().returncode == 3
    assert finished_battery.launches() == launches
    assert changed(before, mtimes(finished_battery.out)) == set()
    assert finished_battery.states() == BATTERY_STATES


def test_a_directory_restored_from_a_tarball_rewrites_nothing(
    finished_battery: Project,
) -> None:
    settled(finished_battery)
    launches = finished_battery.launches()
    tarball = finished_battery.root / "out.tar"
    subprocess.run(
        ["tar", "-cf", str(tarball), "-C", str(finished_battery.root), "out"], check=True
    )
    shutil.rmtree(finished_battery.out)
    subprocess.run(["tar", "-xf", str(tarball), "-C", str(finished_battery.root)], check=True)
    before = mtimes(finished_battery.out)  # (as the tarball kept them)
    assert finished_battery.run().returncode == 3
    assert finished_battery.launches() == launches
    assert changed(before, mtimes(finished_battery.out)) == set()


def test_a_same_size_edit_with_its_mtime_restored_is_noticed_in_a_copy(
    finished_battery: Project,
) -> None:
    settled(finished_battery)
    restore_copy(finished_battery)
    path = finished_battery.cell_dir("ok:agent:1") / "cell.json"
    cell_id = path.parent.name
    receipt = json.loads(path.read_text())
    graded = receipt["graded_at"]
    # the same length: another second of the same minute
    edited = graded[:17] + ("1" if graded[17] != "1" else "2") + graded[18:]
    info = path.stat()
    path.write_bytes(path.read_bytes().replace(graded.encode(), edited.encode()))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size
    before = mtimes(finished_battery.out)
    assert finished_battery.run().returncode == 3
    rewritten = changed(before, mtimes(finished_battery.out))
    exported = f"export/cells/{cell_id}.json"
    assert edited in (finished_battery.out / exported).read_text()
    assert {name for name in rewritten if name.startswith("export/")} == {exported}
    pages = pages_listing(cell_id)
    assert {name for name in rewritten if name.startswith("report/")} <= pages
    assert rewritten - pages - {exported} <= {"summary.json"}  # (its generated_at)


def test_a_moved_directory_resumes_with_nothing_run_or_rewritten(
    finished_battery: Project,
) -> None:
    settled(finished_battery)
    launches = finished_battery.launches()
    moved = finished_battery.root / "elsewhere" / "out"
    moved.parent.mkdir()
    subprocess.run(["cp", "-a", str(finished_battery.out), str(moved)], check=True)
    shutil.rmtree(finished_battery.out)
    finished_battery.out = moved
    before = mtimes(moved)
    assert finished_battery.run().returncode == 3
    assert finished_battery.launches() == launches
    assert finished_battery.states() == BATTERY_STATES
    assert changed(before, mtimes(moved)) == set()


def test_a_moved_export_is_mirrored_and_checked(finished_battery: Project) -> None:
    settled(finished_battery)
    moved = finished_battery.root / "elsewhere" / "out"
    moved.parent.mkdir()
    subprocess.run(["cp", "-a", str(finished_battery.out), str(moved)], check=True)
    finished_battery.out = moved
    exported = next((moved / "export" / "cells").iterdir())
    projected = exported.read_bytes()
    info = exported.stat()
    # the same size, its mtime restored: only its bytes tell; it is projected again
    exported.write_bytes(projected.replace(b"attempt", b"attempX", 1))
    os.utime(exported, ns=(info.st_atime_ns, info.st_mtime_ns))
    (moved / "export" / "notes.txt").write_text(f"copied from {moved}/cells")
    result = finished_battery.run()
    assert result.returncode == 3
    assert "export/notes.txt: (text): contains absolute path" in result.stderr
    assert exported.read_bytes() == projected


def test_a_moved_report_holding_its_new_path_is_checked_again(finished_battery: Project) -> None:
    settled(finished_battery)
    page = finished_battery.out / "report" / "index.html"
    moved = finished_battery.root / "elsewhere" / "out"
    moved.parent.mkdir()
    subprocess.run(["cp", "-a", str(finished_battery.out), str(moved)], check=True)
    finished_battery.out = moved
    # a page that holds the directory's new path: the state vouched for other bytes
    (moved / "report" / "index.html").write_bytes(page.read_bytes() + str(moved).encode())
    result = finished_battery.run()
    assert result.returncode == 3
    assert str(moved) not in (moved / "report" / "index.html").read_text()


def cache_values(out: Path) -> dict[str, tuple[bytes, int]]:
    """The bytes and mtime_ns of every cache's values (each sidecar's NAME.json, whose
    stats are in NAME.stats beside it), by name."""
    paths = [*out.glob(".*.json"), *(out / ".export-state").glob("*.json")]
    return {
        str(path.relative_to(out)): (path.read_bytes(), path.stat().st_mtime_ns) for path in paths
    }


def test_a_copy_is_warm_again_after_one_run(finished_battery: Project) -> None:
    """The run after a copy records the new stats of every file whose bytes vouched for it
    (plan.json's index and summary.json's key too): the next run reads neither again. Only
    the caches' stats are written: their values (a hundred megabytes at 100,000 cells)
    are the same and left as they are."""
    settled(finished_battery)
    restore_copy(finished_battery)
    out = finished_battery.out
    values = cache_values(out)
    assert len(values) == 7  # plan, receipt, output, report state and rows, summary, export
    stats = {name: (out / name).stat().st_mtime_ns for name in values}
    assert finished_battery.run().returncode == 3
    assert cache_values(out) == values
    assert all(
        (out / name).with_suffix(".stats").stat().st_mtime_ns != mtime
        for name, mtime in stats.items()
        if name != ".report-rows.json"  # (rows vouch for no file)
    )
    for sidecar, name in ((".plan-index.json", "plan.json"), (".summary-key.json", "summary.json")):
        again = caches.Sidecar(out / sidecar, caches.cache_key())
        assert again.fresh(name, (out / name).stat()) is not caches.MISS
    every = [*out.glob(".*.json"), *out.glob(".*.stats"), *(out / ".export-state").iterdir()]
    written = {path: path.stat().st_mtime_ns for path in every}
    assert finished_battery.run().returncode == 3
    assert {path: path.stat().st_mtime_ns for path in every} == written  # warm: none


def test_the_moved_check_answers_as_the_full_check() -> None:
    """The bytes-first shortcut of `clean_here` says what the leak finder would."""
    for here in ("/srv/ci/out", "/srv/a&b/out"):
        _same_answers(here)
    assert clean_here(b"anything", "f", None)


def test_the_caches_key_holds_wherever_the_directory_moves(tmp_path: Path) -> None:
    """The export's and the report's key leaves the output directory's path out, and its
    length too: a directory moved to a path shorter than the workspace's (secrets list
    paths longest first) keys its caches as before, so nothing is projected again."""
    from brigade.outdir.export import movable_digest

    workspace = "/srv/ci/a-workspace-folder"

    def key(out: str) -> str:
        paths = [(out, "."), (workspace, "<workspace>"), ("/srv/ci/inputs", "<manifest-dir>")]
        return movable_digest(make_secrets({"a prompt"}, paths, {"v"}), Path(out))

    first = key("/srv/ci/a-rather-long-output-folder/out")
    assert key("/o/out") == first
    assert key("/srv/ci/inputs/out") == first
    assert key("/srv/ci/a-workspace-folder-and-more/x") == first
    secrets = make_secrets({"a prompt"}, [("/o/out", "."), ("/srv/other", "<workspace>")], {"v"})
    assert movable_digest(secrets, Path("/o/out")) != first  # another workspace: another key


def _same_answers(here: str) -> None:
    moved = make_secrets((), [(here, ".")], ())
    texts = [
        "nothing here",
        f"see {here}/cells/x",
        f"see {here}",
        f"{here}x is another folder",
        "see &#47;srv&#47;ci&#47;out/cells",
        "see /srv/ci/outside",
        "GIT binary patch\nliteral 3\nabc\n",
        '{"a": "\\/srv\\/ci\\/out"}',
        "a &amp; b &lt;/srv/ci/out&gt; &quot;x&#x27;",
        "a &amp; b &lt;p&gt; &quot;x&#x27;",
        "a &amp;&sol;srv/ci/out",
        "a &amp /srv/ci/out",
        "a &amp;lt; b",
        "/srv/a&amp;b/out and /srv/a&b/out",
        # script beside markup: `&&`, a lone `&`, and entities hidden after them
        "if (a && b) { go('/srv/ci/elsewhere'); } a & b &amp; c&",
        "a &&#47;srv&#47;ci&#47;out",
        "a & &sol;srv&sol;ci&sol;out",
        "a &ampx; &#x2F;srv&#x2F;ci&#x2F;out",
        "&#;&#x;&;& ;&\t&\n&<&#47srv&#47ci&#47out",
        "&amp;#47;srv&amp;#47;ci&amp;#47;out",
    ]
    # and strings made of the pieces entities and paths are made of
    pieces = ["&", "#", "x", "47", "2F", ";", "sol", "amp", "lt", here, "/", "srv", " ", "a"]
    draw = random.Random(7)
    texts += ["".join(draw.choices(pieces, k=draw.randint(1, 12))) for _ in range(3000)]
    for text in texts:
        for markup in (False, True):
            shown = html.unescape(text) if markup else text
            full = not find_leaks_in_text("f", shown, moved)
            assert clean_here(text.encode(), "f", moved, markup=markup) == full, (here, text)


def test_receipts_say_where_their_run_is_relative_to_the_output_directory(
    finished_battery: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A moved directory's index holds as it is: no view is made again, nothing relocated."""
    from brigade.outdir import legacy, results, scan, store

    settled(finished_battery)
    path = finished_battery.cell_dir("ok:agent:1") / "cell.json"
    receipt = json.loads(path.read_text())
    relative = store.run_path(path.parent.name, receipt["attempt"])
    assert receipt["run_path"] == relative
    assert receipt["run_dir"] == str(finished_battery.out.absolute() / relative)  # (v1 readers)
    plan = results.load_plan(finished_battery.out)
    before = scan.scan(finished_battery.out, plan).recorded
    moved = finished_battery.root / "elsewhere" / "out"
    moved.parent.mkdir()
    finished_battery.out.rename(moved)

    def no_relocation(*args: object) -> None:
        raise AssertionError("relocated on a resume")

    monkeypatch.setattr(legacy, "relocated", no_relocation)
    scanned = scan.scan(moved, plan)
    assert scanned.recorded == before
    assert not scanned.changed  # every view as the index holds it
    monkeypatch.undo()
    full = store.read_receipt(moved, path.parent.name)
    assert full is not None and full.document["run_dir"] == str(moved / relative)


def test_a_copy_with_one_receipt_edited_exports_and_shows_that_edit(
    finished_battery: Project,
) -> None:
    """An edit that leaves attempt, state and graded_at as they were is still new content:
    its export file and its pages are made again, nothing else is."""
    settled(finished_battery)
    restore_copy(finished_battery)
    path = finished_battery.cell_dir("ok:agent:1") / "cell.json"
    cell_id = path.parent.name
    receipt = json.loads(path.read_text())
    started = receipt["started_at"]
    edited = started[:17] + ("1" if started[17] != "1" else "2") + started[18:]
    path.write_bytes(path.read_bytes().replace(started.encode(), edited.encode()))
    before = mtimes(finished_battery.out)
    assert finished_battery.run().returncode == 3
    rewritten = changed(before, mtimes(finished_battery.out))
    exported = f"export/cells/{cell_id}.json"
    assert edited in (finished_battery.out / exported).read_text()
    # (the summary names each seat's first and last start)
    assert exported in rewritten
    assert {name for name in rewritten if name.startswith("export/")} <= {
        exported,
        "export/summary.json",
    }
    pages = pages_listing(cell_id)
    assert {name for name in rewritten if name.startswith("report/")} <= pages
    assert rewritten - pages - {exported, "export/summary.json"} <= {"summary.json"}


def test_a_changed_cell_is_the_only_one_read_again_for_the_index(
    finished_battery: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index and JUnit list every cell: with one receipt edited, they are made from the
    rows kept for the others (by their stamps) and that cell's receipt, read again with
    those of its own two pages and no other; the bytes are a fresh build's."""
    from brigade.outdir import results, scan, store
    from brigade.report import build
    from brigade.report.paging import page_plans

    settled(finished_battery)
    out = finished_battery.out
    assert (out / build.ROWS_FILE).is_file()
    path = finished_battery.cell_dir("ok:agent:1") / "cell.json"
    receipt = json.loads(path.read_text())
    receipt["duration_seconds"] = 12.5
    path.write_text(json.dumps(receipt))
    plan = results.load_plan(out)
    views = scan.scan(out, plan).recorded
    summary = json.loads((out / "summary.json").read_text())
    read: list[str] = []
    real = store.read_receipt

    def counted(folder: Path, cell_id: str) -> dict[str, object] | None:
        read.append(cell_id)
        return real(folder, cell_id)

    monkeypatch.setattr(store, "read_receipt", counted)
    workspace = finished_battery.workspace
    assert build.write_report(out, plan, views, summary, workspace=workspace).leaks == ()
    pages = [p for p in page_plans(plan, views, summary["name"]) if receipt["cell_id"] in
             {c.cell_id for c in p.members}]  # fmt: skip
    assert len(pages) == 2
    assert receipt["cell_id"] in read
    assert set(read) <= {c.cell_id for page in pages for c in page.members}
    assert len(set(read)) < len(plan.cells)
    kept = {name: (out / "report" / name).read_bytes() for name in ("index.html", "junit.xml")}
    assert b"12.5" in kept["junit.xml"]
    (out / build.ROWS_FILE).unlink()
    (out / build.STATE_FILE).unlink()
    assert build.write_report(out, plan, views, summary, workspace=workspace).leaks == ()
    assert len(set(read)) == len(plan.cells)  # (all read for a fresh build)
    for name, data in kept.items():
        assert (out / "report" / name).read_bytes() == data, name
