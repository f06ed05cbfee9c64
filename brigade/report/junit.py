"""JUnit XML for CI test reporters: a testsuite per seat, a testcase per cell.

A testcase's `<system-out>` holds the agent's answer and `<system-err>` the fault
it met (both projected and cut); its failure or error message says why.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from brigade.report.model import ReportCell

# characters XML 1.0 cannot carry, even escaped
_XML_ILLEGAL = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    return _XML_ILLEGAL.sub("\ufffd", text)


def _seconds(value: float | None) -> str:
    return f"{value or 0.0:.3f}"


def _outcome_element(cell: ReportCell) -> tuple[str, dict[str, str]] | None:
    """The JUnit child that tells a cell's result: failure, error, skipped, or none (passed)."""
    detail = cell.failure_detail
    if cell.state == "accepted":
        return None
    if cell.real_failure:
        if cell.state == "rejected":
            failed = [
                g for g in cell.graders if g.get("status") == "scored" and g.get("score") != 1
            ]
            why = "; ".join(f"{g.get('grader_id')}: {g.get('detail')}" for g in failed)
            message = f"rejected: {why}" if why else "rejected"
        else:
            message = f"execution_error: {detail or 'the seat failed'}"
        return "failure", {"type": cell.state, "message": message}
    if cell.measurement_failure:
        # the fault's own kind (auth, quota, rate_limited, ...) and the provider's message
        kind = cell.fault_kind or cell.failure_reason or cell.state
        message = f"measurement failure, not counted against the seat: {cell.label}"
        return "error", {"type": kind, "message": f"{message}: {detail}" if detail else message}
    reasons = {
        "unscored": "unscored: no graders (not a pass)",
        "running": "running: not finished (crashed or still in flight); re-runs on the next run",
        "missing": "missing: not run yet",
    }
    return "skipped", {"message": reasons.get(cell.state, f"{cell.state}: not finished")}


def _usage_properties(cell: ReportCell) -> list[tuple[str, str]]:
    """Tokens and cost of the cell over every attempt; an unknown value is left out (never
    0), and `usage_partial` says when a total leaves an attempt of unknown usage out."""
    usage = cell.usage
    if usage is None:
        return []
    shown = []
    for key in ("input_tokens", "cached_input_tokens", "output_tokens", "total_tokens"):
        if isinstance(usage.get(key), int):
            shown.append((key, str(usage[key])))
    if isinstance(usage.get("cost_usd"), (int, float)):
        shown.append(("cost_usd", repr(float(usage["cost_usd"]))))
    if usage.get("attempts"):
        shown.append(("usage_attempts", str(usage["attempts"])))
    if usage.get("partial"):
        shown.append(("usage_partial", "true"))
    return shown


def _grader_properties(cell: ReportCell) -> list[tuple[str, str]]:
    """What the cell's judges spent (their last grading): runs, tokens, cost; an unknown
    value is left out, and `grader_usage_partial` says a judge's cost is unknown."""
    usage = cell.grader_usage
    if not usage or not usage.get("results"):
        return []
    shown = [("grader_runs", str(usage["results"]))]
    for key in ("input_tokens", "output_tokens"):
        if isinstance(usage.get(key), int):
            shown.append((f"grader_{key}", str(usage[key])))
    if isinstance(usage.get("cost_usd"), (int, float)):
        shown.append(("grader_cost_usd", repr(float(usage["cost_usd"]))))
    if usage.get("results_cost_unknown"):
        shown.append(("grader_usage_partial", "true"))
    return shown


def junit_xml(name: str, cells: Sequence[ReportCell]) -> bytes:
    """JUnit XML: a testsuite per seat, a testcase per cell (name coordinate, classname case)."""
    root = ET.Element("testsuites", name=_xml_text(name))
    suites: dict[str, list[ReportCell]] = {}
    for cell in cells:
        suites.setdefault(cell.seat, []).append(cell)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for index, (seat, members) in enumerate(suites.items()):
        suite = ET.SubElement(root, "testsuite", name=_xml_text(seat), id=str(index))
        counts = {"tests": len(members), "failures": 0, "errors": 0, "skipped": 0}
        suite_time = 0.0
        for cell in members:
            case = ET.SubElement(
                suite,
                "testcase",
                name=_xml_text(cell.coordinate),
                classname=_xml_text(cell.case_id),
                time=_seconds(cell.duration),
            )
            suite_time += cell.duration or 0.0
            properties = ET.SubElement(case, "properties")
            for key, text in (
                ("cell_id", cell.cell_id),
                ("attempt", str(cell.attempt or 0)),
                ("state", cell.state),
                *_usage_properties(cell),
                *_grader_properties(cell),
            ):
                ET.SubElement(properties, "property", name=key, value=_xml_text(text))
            outcome = _outcome_element(cell)
            if outcome is not None:
                tag, attributes = outcome
                ET.SubElement(case, tag, {k: _xml_text(v) for k, v in attributes.items()})
                counts[{"failure": "failures", "error": "errors"}.get(tag, tag)] += 1
            # what the agent said (a CI test tab shows it) and the fault it met
            if cell.answer:
                ET.SubElement(case, "system-out").text = _xml_text(cell.answer)
            if cell.fault:
                ET.SubElement(case, "system-err").text = _xml_text(cell.fault)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", _seconds(suite_time))
        total_time += suite_time
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _seconds(total_time))
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
