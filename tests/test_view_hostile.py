"""`brigade view` over hostile output directories: receipts too big, too deep, a link out, a
FIFO, a folder; files and folders of a cell linked out; the real server over all of them;
and what its JSON answers say of the prompts."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import BATTERY, FAKE_CLI, Project
from test_view import Served, two_seats

from brigade.core import jsontext
from brigade.outdir import feed, store
from brigade.report.pages import case_key
from brigade.report.serve import open_viewer

OUTSIDE = "a receipt from outside the output directory"


def plant(project: Project, cell_id: str, how: str, outside: Path) -> None:
    """Make cell.json of a cell (and of its attempt) hostile."""
    receipt = store.cell_dir(project.out, cell_id) / store.RECEIPT_FILE
    good = json.loads(receipt.read_text())
    receipt.unlink()
    if how == "huge":  # valid JSON past the size cap
        good["failure_detail"] = "x" * (jsontext.MAX_BYTES + 1024)
        receipt.write_text(json.dumps(good))
    elif how == "deep":  # nested past the depth cap (far past the parser's recursion)
        receipt.write_text("[" * 200_000 + "]" * 200_000)
    elif how == "link":  # a valid receipt, outside
        good["failure_detail"] = OUTSIDE
        target = outside / f"{cell_id}.json"
        target.write_text(json.dumps(good))
        receipt.symlink_to(target)
    elif how == "fifo":  # a reader that opens it blocks, unless it never waits
        os.mkfifo(receipt)
    elif how == "folder":  # a folder where the file should be, a valid receipt inside
        receipt.mkdir()
        good["failure_detail"] = OUTSIDE
        (receipt / store.RECEIPT_FILE).write_text(json.dumps(good))
    else:
        raise AssertionError(how)


HOW = ("huge", "deep", "link", "fifo", "folder")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Project, Served, dict]]:
    """BATTERY on two seats, five of its cells' receipts hostile, and a viewer serving it."""
    project = Project(tmp_path_factory.mktemp("hostile"))
    two_seats(project)
    done = project.doit(BRIGADE_CACHE_DIR=str(tmp_path_factory.mktemp("cache")))
    assert done.returncode == 3, done.stderr
    outside = tmp_path_factory.mktemp("outside")
    plan = json.loads((project.out / "plan.json").read_text())
    ids = {c["coordinate"]: c["cell_id"] for c in plan["cells"]}
    victims = ("ok:agent:1", "no:agent:1", "ok:other:1", "no:other:1", "free:agent:1")
    planted = dict(zip(HOW, victims, strict=True))
    for how, coordinate in planted.items():
        plant(project, ids[coordinate], how, outside)
    started = time.monotonic()
    served = Served(open_viewer([project.out]))
    assert time.monotonic() - started < 20  # read, not hung on the FIFO
    yield project, served, {how: ids[c] for how, c in planted.items()}
    served.close()


def test_a_hostile_receipt_is_a_cell_shown_unreadable(
    hostile: tuple[Project, Served, dict],
) -> None:
    project, served, planted = hostile
    rows = {r[0]: r for r in served.json("0/api/cells?limit=500")["rows"]}
    assert len(rows) == 10
    for how, cell_id in planted.items():
        assert rows[cell_id][5] == "unreadable", (how, rows[cell_id])
        assert rows[cell_id][7].startswith("unreadable"), how
    others = [r for cid, r in rows.items() if cid not in planted.values()]
    assert "unreadable" not in {r[5] for r in others}
    changes = served.json("0/api/changes")
    assert changes["counts"]["unreadable"] == len(HOW)
    assert served.json("0/api/cells?state=unreadable")["matching"] == len(HOW)
    # the feed naming them (a run writing their receipts, say): read again, bounded
    for cell_id in planted.values():
        feed.append(project.out, cell_id, "accepted", 1)
    watched = served.viewer.dirs[0]
    watched.refresh()
    states = [watched.rows[watched.by_id[c]].state for c in planted.values()]
    assert states == ["unreadable"] * len(HOW)


@pytest.mark.parametrize("how", HOW)
def test_every_page_of_a_hostile_receipt_answers(
    hostile: tuple[Project, Served, dict], how: str
) -> None:
    project, served, planted = hostile
    cell_id = planted[how]
    plan = json.loads((project.out / "plan.json").read_text())
    case = next(c["case_id"] for c in plan["cells"] if c["cell_id"] == cell_id)
    key = case_key(case)
    for path in (
        f"0/cell/{cell_id}",
        f"0/api/cell/{cell_id}",
        f"0/case/{key}",
        "0/",
        "0/api/stats",
        "0/api/matrix",
        "compare?base=0&new=0&a=agent&b=other",
        f"0/file/cells/{cell_id}/cell.json",
    ):
        started = time.monotonic()
        status, _, body = served.under(path)
        assert time.monotonic() - started < 10, path
        assert status in (200, 404), (path, status, body[:300])
        assert OUTSIDE.encode() not in body and b"Traceback" not in body, path
        assert len(body) < 5 * 1024 * 1024, path  # (a file: at most FILE_LIMIT of it)
    page = served.under(f"0/cell/{cell_id}")[2].decode()
    assert re.search(r"<span[^>]*>unreadable</span>", page), page[:2000]
    assert "is no receipt brigade reads" in page
    assert ">unreadable<" in served.under(f"0/case/{key}")[2].decode()
    # the server goes on
    assert served.under("0/")[0] == 200


def test_a_run_file_linked_out_is_never_read(project: Project, tmp_path: Path) -> None:
    project.write_roster({"agent": {"cli": FAKE_CLI}})
    project.write_manifest([{"id": "a", "prompt": "answer: hello\nstderr: oops\nexit: 2"}])
    assert project.doit().returncode in (1, 3)
    secret = tmp_path / "secret.txt"
    secret.write_text("the contents of a file outside")
    (cell_id,) = [p.name for p in (project.out / "cells").iterdir()]
    run = store.run_dir(project.out, cell_id, 1)
    for name in ("final.txt", "stderr.log", "stdout.log", "transcript.json", "run.json"):
        (run / name).unlink(missing_ok=True)
        (run / name).symlink_to(secret)
    served = Served(open_viewer([project.out], show_prompts=True))
    try:
        for path in (f"0/cell/{cell_id}", f"0/api/cell/{cell_id}", "0/api/cells", "0/"):
            status, _, body = served.under(path)
            assert status == 200 and b"contents of a file outside" not in body, path
        for name in ("final.txt", "stderr.log"):
            rel = run.relative_to(project.out).as_posix()
            assert served.under(f"0/file/{rel}/{name}")[0] == 404
    finally:
        served.close()


ELSEWHERE = "an answer from outside the output directory"


def test_folders_of_a_cell_linked_out_are_never_read(project: Project, tmp_path: Path) -> None:
    """A cell folder, its attempts folder and an attempt's run folder each replaced by a link
    to a copy outside (whose receipt and answer say so): the viewer's rows, pages and files
    and the static report show nothing of the copy, before and after the feed names them."""
    import shutil

    project.write_roster({"agent": {"cli": FAKE_CLI}})
    project.write_manifest([{"id": case, "prompt": "answer: hello"} for case in "abc"])
    assert project.doit().returncode == 0
    plan = json.loads((project.out / "plan.json").read_text())
    ids = {c["case_id"]: c["cell_id"] for c in plan["cells"]}
    outside = tmp_path / "outside"
    linked = {"a": ".", "b": store.ATTEMPTS_DIR, "c": f"{store.ATTEMPTS_DIR}/attempt-001/run"}
    for case, part in linked.items():
        here = (store.cell_dir(project.out, ids[case]) / part).resolve()
        copy = outside / case
        shutil.copytree(here, copy)
        for receipt in copy.rglob(store.RECEIPT_FILE):
            doc = json.loads(receipt.read_text())
            doc.update(state="rejected", failure_detail=OUTSIDE)
            receipt.write_text(json.dumps(doc))
        for final in copy.rglob("final.txt"):
            final.write_text(ELSEWHERE)
        shutil.rmtree(here)
        here.symlink_to(copy, target_is_directory=True)
    served = Served(open_viewer([project.out], show_prompts=True))
    try:
        for round_ in ("loaded", "named by the feed"):
            rows = {r[0]: r for r in served.json("0/api/cells")["rows"]}
            assert rows[ids["a"]][5] == "unreadable", round_
            assert [rows[ids[c]][5] for c in "bc"] == ["unscored"] * 2, round_
            for cell_id in ids.values():
                for path in (f"0/cell/{cell_id}", f"0/api/cell/{cell_id}", "0/api/cells"):
                    status, _, body = served.under(path)
                    assert status == 200, (path, body[:300])
                    assert ELSEWHERE.encode() not in body and OUTSIDE.encode() not in body, path
                # every one has a link on the way to its answer
                path = f"0/file/cells/{cell_id}/{store.ATTEMPTS_DIR}/attempt-001/run/final.txt"
                assert served.under(path)[0] == 404, path
            assert served.under(f"0/file/cells/{ids['a']}/cell.json")[0] == 404
            for cell_id in ids.values():
                feed.append(project.out, cell_id, "rejected", 1)
            served.viewer.dirs[0].refresh()
    finally:
        served.close()
    done = project.brigade("report", str(project.out))
    assert done.returncode == 3, done.stderr  # (a cell without a receipt: incomplete)
    for page in (project.out / "report").rglob("*.html"):
        text = page.read_text()
        assert ELSEWHERE not in text and OUTSIDE not in text, page


def test_the_real_server_answers_over_hostile_files_and_never_blocks(
    hostile: tuple[Project, Served, dict], tmp_path: Path
) -> None:
    """`brigade view` itself (a process of its own) over the hostile directory, and a
    readable cell whose run files are hostile too (stderr a FIFO, the answer a folder, the
    transcript past the read bound, run.json nested past the depth cap, a log bigger than
    a file is shown): it starts, answers every page of every hostile cell in time, and
    goes on serving."""
    import http.client
    import subprocess

    from conftest import brigade_command

    project, _, planted = hostile
    plan = json.loads((project.out / "plan.json").read_text())
    crash = next(c["cell_id"] for c in plan["cells"] if c["coordinate"] == "crash:agent:1")
    run = store.run_dir(project.out, crash, 1)
    os.mkfifo(run / "stdout.fifo")
    for name in ("stderr.log", "final.txt", "transcript.json", "run.json"):
        (run / name).unlink(missing_ok=True)
    os.mkfifo(run / "stderr.log")
    (run / "final.txt").mkdir()
    (run / "transcript.json").write_bytes(b"[" * (jsontext.MAX_BYTES + 10))
    (run / "run.json").write_text("[" * 100_000 + "]" * 100_000)
    (run / "big.log").write_bytes(b"x" * (5 * 1024 * 1024))
    viewer = subprocess.Popen(
        [*brigade_command(), "view", str(project.out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=project.env(),
    )
    try:
        assert viewer.stdout is not None
        found = re.search(r"http://127\.0\.0\.1:(\d+)(/[\w-]+/)", viewer.stdout.readline())
        assert found
        port, prefix = int(found[1]), found[2]

        def get(path: str) -> tuple[int, bytes]:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("GET", prefix + path)
            response = connection.getresponse()
            body = response.read()
            connection.close()
            return response.status, body

        rel = run.relative_to(project.out).as_posix()
        paths = [f"0/file/{rel}/{name}" for name in ("stdout.fifo", "stderr.log", "final.txt")]
        for cell_id in [*planted.values(), crash]:
            paths += [f"0/cell/{cell_id}", f"0/api/cell/{cell_id}"]
            paths.append(f"0/file/cells/{cell_id}/cell.json")
        for path in paths:
            status, body = get(path)
            assert status in (200, 404), (path, status)
            assert OUTSIDE.encode() not in body and b"Traceback" not in body, path
        status, body = get(f"0/file/{rel}/big.log")
        assert status == 200 and 4 * 1024 * 1024 <= len(body) < 5 * 1024 * 1024
        assert body.endswith(b"[truncated]\n")
        assert get(f"0/file/{rel}/stdout.fifo")[0] == 404
        status, body = get(f"0/cell/{crash}")
        assert status == 200 and b"execution_error" in body
        assert get(f"0/case/{case_key('crash')}")[0] == 200
        assert get("0/api/cells?state=unreadable")[0] == 200
        assert json.loads(get("0/api/changes")[1])["counts"]["unreadable"] == len(HOW)
        assert viewer.poll() is None
    finally:
        viewer.terminate()
        _, errors = viewer.communicate(timeout=10)
        (run / "stdout.fifo").unlink()
        (run / "stderr.log").unlink()  # (the FIFO; the other hostile files are left)
    assert "Traceback" not in errors


# -- prompts ---------------------------------------------------------------------------

MARK = "prompt-mark-5d1c9a"


def test_no_answer_of_the_viewer_holds_a_prompt_unless_shown(project: Project) -> None:
    """Every endpoint (pages, JSON, fragments, files, the comparison) over cells whose prompt
    is a mark, one of them answered with its whole prompt: the mark nowhere, until
    --show-prompts."""
    echo = f"env: ECHO_PROMPT\n{MARK} echo"
    two_seats(project, [*BATTERY, {"id": "echo", "prompt": echo}])
    assert project.doit(ECHO_PROMPT=echo).returncode == 3
    plan = json.loads((project.out / "plan.json").read_text())
    assert MARK in json.dumps(plan)  # (brigade's own record of the plan holds it)
    paths = endpoints(project, plan)

    def bodies(show: bool) -> dict[str, bytes]:
        served = Served(open_viewer([project.out], show_prompts=show))
        try:
            found = {}
            for path in paths:
                status, _, body = served.under(path)
                assert status in (200, 302, 404), (path, status)
                found[path] = body
            return found
        finally:
            served.close()

    hidden = bodies(False)
    leaked = [path for path, body in hidden.items() if MARK.encode() in body]
    assert leaked == []
    shown = bodies(True)
    echo_cell = next(c["cell_id"] for c in plan["cells"] if c["case_id"] == "echo")
    assert MARK.encode() in shown[f"0/cell/{echo_cell}"]
    assert MARK.encode() in shown[f"0/api/cell/{echo_cell}"]


def endpoints(project: Project, plan: dict[str, Any]) -> list[str]:
    """Every path the viewer answers for this directory."""
    paths = [
        "",
        "0/",
        "0/api/cells?limit=500",
        "0/api/cells?q=echo",
        "0/api/changes",
        "0/api/changes?since=0",
        "0/api/stats",
        "0/api/matrix",
        "compare?base=0&new=0",
        "compare?base=0&new=0&a=other&b=agent",
    ]
    for cell in plan["cells"]:
        paths += [f"0/cell/{cell['cell_id']}", f"0/api/cell/{cell['cell_id']}"]
        key = case_key(cell["case_id"])
        paths.append(f"0/case/{key}")
    for file in (project.out / "cells").rglob("*"):
        if file.is_file() and not file.is_symlink():
            paths.append(f"0/file/{file.relative_to(project.out).as_posix()}")
    return paths
