"""The game day as one self-contained HTML page: the verdict table, where the sandbox's times
differ from AWS's, and a timeline per fault drawn as inline SVG (the expected alarm's metric, the
alarm state bands, the actions taken). No script, no network: it opens anywhere."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape

from pipeops.gameday.model import AlarmChange, FaultObservation, FaultVerdict, GameDayResult, Point

WIDTH, LANE, PLOT = 900, 18, 90  # px: the timeline's width, an alarm band's height, the metric plot's
LEFT, RIGHT = 170, 20
SERIES_COLOUR = "#1f77b4"  # the first metric line (the browser test looks for it)
SERIES_PALETTE = (SERIES_COLOUR, "#ff7f0e", "#9467bd")
STATE_COLOURS = {"ALARM": "#d62728", "OK": "#2ca02c", "INSUFFICIENT_DATA": "#bdbdbd"}
ACTION_COLOUR = "#6a3d9a"
STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #16191f; background: #ffffff; }
table { border-collapse: collapse; margin: 12px 0; }
th, td { border: 1px solid #d5dbdb; padding: 4px 8px; text-align: left; font-size: 14px; }
.pass { color: #1d8102; font-weight: bold; } .fail { color: #d13212; font-weight: bold; }
svg.timeline { display: block; margin: 8px 0 24px; background: #fafafa; border: 1px solid #d5dbdb; }
svg text { font-size: 11px; fill: #16191f; }
"""


def render_html(result: GameDayResult) -> str:
    """The whole report."""
    verdict = '<span class="pass">PASSED</span>' if result.passed else '<span class="fail">FAILED</span>'
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>pipeops game day</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>pipeops game day: {verdict}</h1>",
        f"<p>{len(result.faults)} fault(s){' (short form)' if result.short else ''}, healthy phase {result.healthy_seconds:.0f} s, "
        f"whole game day {result.seconds:.0f} s real; max {result.max_concurrency} concurrent workflows; time scale {result.time_scale:g}.</p>",
        _problems(result),
        _verdict_table(result.verdicts),
        "<h2>Where the sandbox's times differ from AWS's</h2><ul>",
        *(f"<li>{escape(note)}</li>" for note in result.sandbox_timings),
        "</ul><h2>Timelines</h2>",
    ]
    for observation, fault_verdict in zip(result.faults, result.verdicts, strict=True):
        parts.append(f"<h3 id='{escape(observation.fault.name)}'>{escape(observation.fault.name)}: "
                     f"{'passed' if fault_verdict.passed else 'FAILED'}</h3><p>{escape(observation.fault.description)}</p>")
        parts.append(timeline_svg(observation))
    parts.append("</body></html>")
    return "\n".join(parts)


def _problems(result: GameDayResult) -> str:
    if not result.problems:
        return "<p>Every fault detected, notified and repaired with the invariants held; no false alarm.</p>"
    items = "".join(f"<li>{escape(p)}</li>" for p in result.problems)
    return f"<h2 class='fail'>Why it failed</h2><ul>{items}</ul>"


def _seconds(real: float | None, virtual: float | None) -> str:
    if real is None:
        return "-"
    return f"{real:.1f} s ({(virtual or 0) / 60:.1f} virtual min)"


def _verdict_table(verdicts: Sequence[FaultVerdict]) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("fault", "alarm", "detect (real / virtual)", "notified", "paged", "remedy",
                                             "repair (real / virtual)", "invariants", "verdict"))
    rows = []
    for v in verdicts:
        cells = [v.fault, v.alarm or ("none (absorbed)" if v.absorbed else "none"), " ".join(filter(None, (_seconds(v.detect_real, v.detect_virtual), v.timed_text))),
                 "-" if v.absorbed else ("yes" if v.notified else "no"), "-" if v.absorbed else ("yes" if v.paged else "no"), v.remedy, _seconds(v.repair_real, v.repair_virtual),
                 "held" if v.invariants_held else "broken"]
        mark = "<td class='pass'>pass</td>" if v.passed else f"<td class='fail' title='{escape('; '.join(v.problems))}'>fail</td>"
        rows.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + mark + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def timeline_svg(observation: FaultObservation) -> str:
    """One fault's timeline: the metric of each expected alarm, one band per alarm that changed
    state (coloured by state), and the actions as marked lines, on one time axis (real seconds)."""
    start, end = observation.started_at, max(observation.ended_at, observation.started_at + 1.0)
    alarms = sorted({c.alarm for c in observation.changes} | set(observation.fault.expected_alarms))
    actions = [*observation.actions, *observation.audit]
    height = 30 + PLOT + 10 + LANE * len(alarms) + 14 * len(actions) + 30

    def x(at: float) -> float:
        return LEFT + (min(max(at, start), end) - start) / (end - start) * (WIDTH - LEFT - RIGHT)

    body = [_metric_plot(observation.series, x)]
    top = 30 + PLOT + 10
    for row, alarm in enumerate(alarms):
        body.append(_state_band(alarm, [c for c in observation.changes if c.alarm == alarm], start, end, x, top + row * LANE))
    top += LANE * len(alarms) + 8
    for row, action in enumerate(sorted(actions, key=lambda a: a.real_at)):
        ax, y = x(action.real_at), top + row * 14
        body.append(f"<line x1='{ax:.1f}' y1='30' x2='{ax:.1f}' y2='{y:.1f}' stroke='{ACTION_COLOUR}' stroke-dasharray='2,3'/>"
                    f"<text x='{ax + 3:.1f}' y='{y + 4:.1f}'>{escape(action.what)} ({action.real_at - start:.1f} s)</text>")
    axis = f"<text x='{LEFT}' y='{height - 8}'>0 s</text><text x='{WIDTH - RIGHT - 60}' y='{height - 8}'>{end - start:.1f} s real</text>"
    return (f"<svg class='timeline' xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{height}' "
            f"data-fault='{escape(observation.fault.name)}'>{''.join(body)}{axis}</svg>")


def _metric_plot(series: Mapping[str, tuple[Point, ...]], x: Callable[[float], float]) -> str:
    parts = [f"<text x='4' y='{30 + PLOT / 2:.0f}'>metric</text>",
             f"<rect x='{LEFT}' y='30' width='{WIDTH - LEFT - RIGHT}' height='{PLOT}' fill='#ffffff' stroke='#d5dbdb'/>"]
    for index, (alarm, points) in enumerate(series.items()):
        if not points:
            continue
        colour = SERIES_PALETTE[index % len(SERIES_PALETTE)]
        low, high = min(p.value for p in points), max(p.value for p in points)
        span = (high - low) or 1.0

        def y(value: float, low: float = low, span: float = span) -> float:
            return 30 + PLOT - 6 - (value - low) / span * (PLOT - 12)

        path = " ".join(f"{x(p.real_at):.1f},{y(p.value):.1f}" for p in points)
        parts.append(f"<polyline class='series' points='{path}' fill='none' stroke='{colour}' stroke-width='3'/>")
        parts.append(f"<text x='{LEFT + 4}' y='{42 + 12 * index}' fill='{colour}'>{escape(alarm)}: {low:g} .. {high:g}</text>")
    return "".join(parts)


def _state_band(alarm: str, changes: Sequence[AlarmChange], start: float, end: float, x: Callable[[float], float], top: float) -> str:
    """The alarm's state over the window: OK before its first change, then each state in turn."""
    state = changes[0].old if changes else "OK"
    edges = [(start, state)] + [(c.real_at, c.new) for c in changes]
    parts = [f"<text x='4' y='{top + LANE - 5:.0f}'>{escape(alarm)}</text>"]
    for (at, state), (until, _next) in zip(edges, [*edges[1:], (end, "")], strict=True):
        left, right = x(at), x(until)
        colour = STATE_COLOURS.get(state, "#bdbdbd")
        parts.append(f"<rect class='state {state}' x='{left:.1f}' y='{top:.1f}' width='{max(right - left, 1):.1f}' "
                     f"height='{LANE - 3}' fill='{colour}'><title>{escape(state)}</title></rect>")
    return "".join(parts)


def timeline_text(observation: FaultObservation) -> str:
    """One fault's timeline as text, for a failure message or a log: what was done and seen
    (actions, audit records), every alarm state change with its reason (the datapoints the alarm
    judged), and each charted metric's points; seconds from the all-OK check before the injection."""
    start = observation.started_at
    events = [(a.real_at, a.what) for a in (*observation.actions, *observation.audit)]
    events += [(c.real_at, f"{c.alarm} {c.old} -> {c.new}: {c.reason}") for c in observation.changes]
    lines = [f"{observation.fault.name} (remedy {observation.remedy_verdict or '-'}, {observation.remedy_applied} applied):"]
    lines += [f"  {at - start:+7.1f} s  {what}" for at, what in sorted(events, key=lambda event: event[0])]
    for alarm, points in observation.series.items():
        values = ", ".join(f"{p.real_at - start:+.1f}:{p.value:g}" for p in points)
        lines.append(f"  metric of {alarm}: {values or 'no datapoints'}")
    lines += [f"  violated: {violation}" for violation in observation.violations]
    return "\n".join(lines)
