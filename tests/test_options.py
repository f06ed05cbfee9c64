"""engine/options.py: each option declared once; `brigade run`'s flags and doit's variables
come from the one table, and every value is checked in one place."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from brigade.core.selection import CellFilter
from brigade.engine.options import (
    DOIT_VARIABLES,
    OPTIONS,
    Options,
    add_arguments,
    from_arguments,
    from_variables,
)
from brigade.errors import BrigadeError, InputError
from brigade.front import cli

REPO = Path(__file__).resolve().parents[1]


def run_parser() -> argparse.ArgumentParser:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices["run"]


def test_every_flag_and_variable_comes_from_the_table() -> None:
    flags = {s for a in run_parser()._actions for s in a.option_strings} - {"-h", "--help"}
    declared = {o.flag for o in OPTIONS if o.flag} | {o.short for o in OPTIONS if o.short}
    assert flags == declared
    assert DOIT_VARIABLES == tuple(o.variable for o in OPTIONS if o.variable)
    # the synopsis of doit in docs/commands.md names every variable
    commands = (REPO / "docs" / "commands.md").read_text()
    synopsis = commands.split("# Commands", 1)[1].split("doit list", 1)[0]
    for name in DOIT_VARIABLES:
        assert f"{name}=" in synopsis, name


def test_both_sides_give_the_same_options() -> None:
    args = run_parser().parse_args(
        [
            "m.yaml",
            "-n",
            "4",
            "--retries",
            "2",
            "--retry-backoff",
            "1.5",
            "--max-cost",
            "3",
            "--sandbox",
            "off",
            "--case",
            "a*",
            "--case",
            "b",
            "--trial",
            "2",
            "-q",
        ]
    )
    from_flags = from_arguments(args, manifest=args.manifest)
    from_doit = from_variables(
        {
            "manifest": "m.yaml",
            "jobs": "4",
            "retries": "2",
            "retry_backoff": "1.5",
            "max_cost": "3",
            "sandbox": "OFF",
            "cases": "a*,b",
            "trials": "2",
            "quiet": "yes",
        }
    )
    assert (
        from_flags
        == from_doit
        == Options(
            manifest=Path("m.yaml"),
            jobs=4,
            retries=2,
            retry_backoff=1.5,
            max_cost=3.0,
            sandbox="off",
            cells=CellFilter(cases=("a*", "b"), trials=(2,)),
            quiet=True,
        )
    )


@pytest.mark.parametrize(
    ("field", "value", "line"),
    [
        ("max_cost", 0.0, "--max-cost 0 (doit: max_cost=): use a number of US dollars above 0"),
        ("retries", 101, "--retries 101 (doit: retries=): use 0 to 100 retries"),
        (
            "retry_backoff",
            -1.0,
            "--retry-backoff -1 (doit: retry_backoff=): use 0 to 86400 seconds",
        ),
        ("jobs", 0, "--jobs 0 (doit: jobs=): use 1 or more seat runs at once"),
    ],
)
def test_one_check_for_both_sides(field: str, value: object, line: str) -> None:
    with pytest.raises(InputError) as flagged:
        Options(manifest=Path("m.yaml"), **{field: value})  # type: ignore[arg-type]
    assert str(flagged.value) == line
    variable = next(o.variable for o in OPTIONS if o.field == field)
    text = f"{value:g}" if isinstance(value, float) else str(value)
    with pytest.raises(InputError) as given:
        from_variables({str(variable): text})
    assert str(given.value) == line


@pytest.mark.parametrize(
    ("variable", "value", "line"),
    [
        ("wait", "maybe", "doit variable wait='maybe': use 1 or 0"),
        ("executor", "k8s", "doit variable executor='k8s': use local or dask"),
        ("sandbox", "on", "doit variable sandbox='on': use auto, required or off"),
        ("trials", "1,x", "doit variable trials='1,x': use trial numbers, e.g. 1,2"),
        ("retries", "two", "doit variable retries='two': use a whole number"),
        ("progress_rate", "-3", "doit variable progress_rate='-3': use a whole number"),
        ("retry_backoff", "soon", "doit variable retry_backoff='soon': use a number of seconds"),
    ],
)
def test_a_variable_that_cannot_be_read_names_what_to_use(
    variable: str, value: str, line: str
) -> None:
    with pytest.raises(BrigadeError) as raised:
        from_variables({variable: value})
    assert str(raised.value) == line


def test_a_command_takes_the_options_it_names() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, ("jobs", "wait", "quiet"))
    args = parser.parse_args(["-n", "3", "--wait"])
    assert from_arguments(args, manifest=Path("m.yaml"), rerun=("a:b:1",)) == Options(
        manifest=Path("m.yaml"), jobs=3, wait=True, rerun=("a:b:1",)
    )
