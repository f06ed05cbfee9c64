"""What the reports show of usage and cost: each seat's agent, its spending, accepted rate
against cost (an inline SVG chart with the Pareto front), and the terminal cost table.

Everything comes from summary.json's `by_seat` (`agent`, `usage_all_attempts`) and
`trial_stats`, so every report prices with the same table the summary did.
Unknown is shown as unknown (`–`), never as 0; a total over part of the cells
says so.
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from brigade.core.usage import UNKNOWN, money


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def count(value: Any) -> str:
    """`12,345`, or `–` when unknown."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,.0f}"
    return UNKNOWN


def seat_usage(summary: Mapping[str, Any], seat: str) -> Mapping[str, Any]:
    """A seat's `usage_all_attempts` (empty for a summary written before usage was)."""
    usage = summary["by_seat"].get(seat, {}).get("usage_all_attempts")
    return usage if isinstance(usage, Mapping) else {}


def partial_note(usage: Mapping[str, Any], what: str) -> str:
    """` (3 of 5 cells unknown)` when a total leaves cells out, else ``."""
    unknown = usage.get(f"cells_{what}_unknown") or 0
    if not unknown or not usage.get("cells"):
        return ""
    return f" ({unknown} of {usage['cells']} cells unknown)"


def _dates(agent: Mapping[str, Any]) -> str:
    first, last = agent.get("first_started_at"), agent.get("last_finished_at")
    days = sorted({str(stamp)[:10] for stamp in (first, last) if stamp})
    return " – ".join(days) if days else UNKNOWN


def agents_table(summary: Mapping[str, Any]) -> str:
    """The header's table: each seat's CLI, model (configured and answering), CLI version
    and the dates its cells ran."""
    rows = []
    for seat, data in summary["by_seat"].items():
        agent = data.get("agent") or {}
        used = ", ".join(agent.get("models_used") or []) or UNKNOWN
        versions = ", ".join(agent.get("cli_versions") or []) or UNKNOWN
        cells = [
            agent.get("cli") or UNKNOWN,
            agent.get("model") or "(the CLI's default)",
            used,
            versions,
            _dates(agent),
        ]
        rows.append(
            f"<tr><th>{_e(seat)}</th>" + "".join(f"<td>{_e(v)}</td>" for v in cells) + "</tr>"
        )
    head = ("seat", "CLI", "model (configured)", "models that answered", "CLI version", "ran")
    return (
        '<table id="agents"><thead><tr>'
        + "".join(f"<th>{h}</th>" for h in head)
        + f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def grader_usage(summary: Mapping[str, Any], seat: str) -> Mapping[str, Any]:
    """What the graders that call a model (judges) spent for a seat's cells (empty for a
    summary written before it was kept)."""
    usage = summary["by_seat"].get(seat, {}).get("grader_usage")
    return usage if isinstance(usage, Mapping) else {}


def judges_text(usage: Mapping[str, Any]) -> str:
    """`$2.0000`, `$1.0000 (1 of 3 judge runs unknown)`, `–` when unknown, `` when none ran."""
    runs = usage.get("results") or 0
    if not runs:
        return ""
    unknown = usage.get("results_cost_unknown") or 0
    note = f" ({unknown} of {runs} judge runs unknown)" if unknown else ""
    return money(usage.get("cost_usd")) + note


def cost_columns(summary: Mapping[str, Any], seat: str) -> list[str]:
    """The seat table's cost, tokens and cost per accepted answer (every attempt), and what
    its judges spent."""
    usage = seat_usage(summary, seat)
    return [
        money(usage.get("cost_usd")) + partial_note(usage, "cost"),
        count(usage.get("total_tokens")) + partial_note(usage, "tokens"),
        money(usage.get("cost_usd_per_accepted")),
        judges_text(grader_usage(summary, seat)),
    ]


COST_HEADINGS = ("cost", "tokens", "cost per accepted", "judges' cost")
COST_NOTE = (
    "cost and tokens add up every attempt of the seat's finished cells (failed and retried "
    "attempts cost too); costs the CLI did not report are priced from the roster's price "
    "table; – is unknown, and a total over part of the cells says how many it leaves out. "
    "judges' cost: what the graders that call a model (judges) spent grading the seat's cells, "
    "apart from the seat's own cost."
)


class Point(NamedTuple):
    """One seat on the chart: mean cost per cell against accepted rate."""

    seat: str
    cost: float
    rate: float
    interval: tuple[float, float] | None
    partial: bool


def pareto_front(points: Sequence[Point]) -> set[str]:
    """Seats no other seat beats on both axes: as cheap or cheaper and as accurate or more,
    better on at least one."""
    front = set()
    for point in points:
        dominated = any(
            other.cost <= point.cost
            and other.rate >= point.rate
            and (other.cost < point.cost or other.rate > point.rate)
            for other in points
        )
        if not dominated:
            front.add(point.seat)
    return front


def chart_points(summary: Mapping[str, Any]) -> tuple[list[Point], list[str]]:
    """The seats that can be plotted, and why each other seat is not."""
    points, left_out = [], []
    for seat, stats in summary["trial_stats"]["by_seat"].items():
        usage = seat_usage(summary, seat)
        cost, rate = usage.get("mean_cost_usd_per_cell"), stats.get("accepted_rate")
        if rate is None:
            left_out.append(f"{seat} (no scored trials)")
        elif not isinstance(cost, (int, float)):
            left_out.append(f"{seat} (cost unknown)")
        else:
            interval = stats.get("interval")
            points.append(
                Point(
                    seat,
                    float(cost),
                    float(rate),
                    (float(interval[0]), float(interval[1])) if interval else None,
                    bool(usage.get("cells_cost_unknown")),
                )
            )
    return points, left_out


def _nice_top(value: float) -> float:
    """A round axis end at or above `value` (1, 2 or 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 5):
        if value <= step * power:
            return step * power
    return 10 * power


def tick_digits(step: float) -> int:
    """Decimals that show every tick of this step as it is (a quarter of $0.05 is $0.0125,
    never a rounded $0.013 beside its gridline), the same for all of them: at least 2."""
    if step <= 0:
        return 2
    digits = max(2, -math.floor(math.log10(step)) + 1)
    # a step of 1, 2 or 5 times a power of ten, quartered, needs at most three more
    while digits < 12 and abs(round(step, digits) - step) > step * 1e-9:
        digits += 1
    return digits


def tick_text(value: float, digits: int) -> str:
    """An axis label: `$0`, else the value with `digits` decimals (one precision per axis)."""
    return "$0" if value == 0 else f"${value:.{digits}f}"


def _label(point: Point) -> str:
    name = point.seat if len(point.seat) <= 24 else point.seat[:23] + "…"
    return name + ("*" if point.partial else "")


# a label's height and the width of one of its characters, in the chart's pixels (12px text)
LABEL_HEIGHT, CHAR_WIDTH = 14.0, 6.8
# points nearer than this (pixels, on both axes) are at one place: their circles overlap
SAME_PLACE = 5.0


def place_labels(
    points: Sequence[tuple[float, float, str]],
) -> list[tuple[float, float, str | None]]:
    """Where each point's label goes so that no two overlap: points at the same place share
    one label (`a, b`; the others get none), and a label that would overlap one placed
    before it moves down a line at a time."""
    placed: list[tuple[float, float, float]] = []  # x, y (baseline), width
    result: list[tuple[float, float, str | None]] = []
    names: dict[int, list[str]] = {}  # the first point of each place -> the labels there
    for index, (cx, cy, label) in enumerate(points):
        first = next(
            (
                lead
                for lead in names
                if abs(points[lead][0] - cx) < SAME_PLACE and abs(points[lead][1] - cy) < SAME_PLACE
            ),
            index,
        )
        names.setdefault(first, []).append(label)
    for index, (cx, cy, _) in enumerate(points):
        if index not in names:
            result.append((cx + 8, cy + 4, None))
            continue
        text = ", ".join(names[index])
        lx, ly, width = cx + 8, cy + 4, len(text) * CHAR_WIDTH
        for _ in range(40):
            if not any(
                lx < ox + ow and ox < lx + width and abs(ly - oy) < LABEL_HEIGHT
                for ox, oy, ow in placed
            ):
                break
            ly += LABEL_HEIGHT
        placed.append((lx, ly, width))
        result.append((lx, ly, text))
    return result


def cost_chart(summary: Mapping[str, Any]) -> str:
    """Accepted rate (with its 95% interval) against mean cost per cell, one point per seat,
    the Pareto front joined and filled; inline SVG (no network)."""
    points, left_out = chart_points(summary)
    if not points:
        reasons = "; ".join(left_out) or "no seats"
        return f'<p class="note" id="cost-chart">No seat to plot: {_e(reasons)}.</p>'
    left, top, plot_w, plot_h, right = 70, 16, 440, 240, 190
    width, height = left + plot_w + right, top + plot_h + 46
    x_top = _nice_top(max(p.cost for p in points) * 1.05)
    front = pareto_front(points)

    def x(cost: float) -> float:
        return left + cost / x_top * plot_w

    def y(rate: float) -> float:
        return top + (1 - rate) * plot_h

    parts = [
        f'<svg id="cost-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" role="img" aria-label="accepted rate against mean cost per cell">'
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts.append(
            f'<line x1="{left}" y1="{y(tick):.1f}" x2="{left + plot_w}" y2="{y(tick):.1f}" '
            f'stroke="#e3e3e3"/><text x="{left - 6}" y="{y(tick) + 4:.1f}" font-size="11" '
            f'text-anchor="end">{tick * 100:.0f}%</text>'
        )
    digits = tick_digits(x_top / 4)
    for step in range(5):
        value = x_top * step / 4
        parts.append(
            f'<line x1="{x(value):.1f}" y1="{top}" x2="{x(value):.1f}" y2="{top + plot_h}" '
            f'stroke="#e3e3e3"/><text x="{x(value):.1f}" y="{top + plot_h + 16}" '
            f'font-size="11" text-anchor="middle">{_e(tick_text(value, digits))}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" font-size="12" '
        'text-anchor="middle">mean cost per cell (every attempt)</text>'
        f'<text x="14" y="{top + plot_h / 2:.1f}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">accepted rate</text>'
    )
    on_front = sorted((p for p in points if p.seat in front), key=lambda p: (p.cost, -p.rate))
    if len(on_front) > 1:
        line = " ".join(f"{x(p.cost):.1f},{y(p.rate):.1f}" for p in on_front)
        parts.append(
            f'<polyline class="front" points="{line}" fill="none" stroke="#1f6fb4" '
            'stroke-width="1.5" stroke-dasharray="4 3"/>'
        )
    labels = place_labels([(x(p.cost), y(p.rate), _label(p)) for p in points])
    for point, (lx, ly, shown) in zip(points, labels, strict=True):
        cx, cy = x(point.cost), y(point.rate)
        best = point.seat in front
        title = (
            f"{point.seat}: accepted {point.rate * 100:.0f}%"
            + (
                f" (95% interval {point.interval[0] * 100:.0f}–{point.interval[1] * 100:.0f}%)"
                if point.interval
                else ""
            )
            + f", {money(point.cost)} per cell"
            + (" (over part of the cells)" if point.partial else "")
            + ("; on the Pareto front" if best else "")
        )
        parts.append(
            f'<g class="seat{" pareto" if best else ""}" data-seat="{_e(point.seat)}">'
            f"<title>{_e(title)}</title>"
        )
        if point.interval is not None:
            low, high = y(point.interval[0]), y(point.interval[1])
            parts.append(
                f'<line x1="{cx:.1f}" y1="{low:.1f}" x2="{cx:.1f}" y2="{high:.1f}" stroke="#555"/>'
                f'<line x1="{cx - 4:.1f}" y1="{low:.1f}" x2="{cx + 4:.1f}" y2="{low:.1f}" '
                'stroke="#555"/>'
                f'<line x1="{cx - 4:.1f}" y1="{high:.1f}" x2="{cx + 4:.1f}" y2="{high:.1f}" '
                'stroke="#555"/>'
            )
        fill = "#1f6fb4" if best else "#fff"
        text = (
            f'<text x="{lx:.1f}" y="{ly:.1f}" font-size="12">{_e(shown)}</text>'
            if shown is not None
            else ""
        )
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{fill}" stroke="#1f6fb4" '
            f'stroke-width="1.5"/>{text}</g>'
        )
    parts.append("</svg>")
    notes = [
        "Filled points joined by the dashed line are the Pareto front: no other seat is as "
        "cheap and as accurate with an edge on either. Whiskers: 95% Wilson interval."
    ]
    if any(p.partial for p in points):
        notes.append("* mean over the cells whose cost is known.")
    if left_out:
        notes.append(f"Not plotted: {'; '.join(left_out)}.")
    return "".join(parts) + f'<p class="note" id="cost-notes">{_e(" ".join(notes))}</p>'


def cost_table_text(summary: Mapping[str, Any]) -> str:
    """Cost per seat for the terminal (under `brigade show`'s matrix): the seat's own, and
    its judges' when a judge ran."""
    judging = any(grader_usage(summary, seat).get("results") for seat in summary["by_seat"])
    head = ["seat", "cost", "per cell", "per accepted", "tokens"]
    head += ["judges"] if judging else []
    head.append("unknown")
    rows = [tuple(head)]
    for seat in summary["by_seat"]:
        usage = seat_usage(summary, seat)
        judged = grader_usage(summary, seat)
        unknown = usage.get("cells_cost_unknown") or 0
        runs, unpriced = judged.get("results") or 0, judged.get("results_cost_unknown") or 0
        notes = [f"{unknown} of {usage.get('cells', 0)} cells"] if unknown else []
        notes += [f"{unpriced} of {runs} judge runs"] if unpriced else []
        row = [
            seat,
            money(usage.get("cost_usd")),
            money(usage.get("mean_cost_usd_per_cell")),
            money(usage.get("cost_usd_per_accepted")),
            count(usage.get("total_tokens")),
        ]
        row += [money(judged.get("cost_usd")) if runs else ""] if judging else []
        row.append("; ".join(notes))
        rows.append(tuple(row))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    last = len(head) - 1
    lines = [
        "  ".join(
            value.ljust(widths[i]) if i in (0, last) else value.rjust(widths[i])
            for i, value in enumerate(row)
        ).rstrip()
        for row in rows
    ]
    note = "cost per seat over every attempt (failed and retried ones too); "
    if judging:
        note += "judges: what the graders that call a model spent on its cells, apart; "
    note += (
        "unknown: cells whose cost is unknown (left out of the totals)"
        if not judging
        else "unknown: cells and judge runs whose cost is unknown (left out of the totals)"
    )
    return "\n".join([*lines, *textwrap.wrap(note, 88)])
