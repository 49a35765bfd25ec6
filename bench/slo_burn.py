"""The page alarm's time to fire on the sandbox: every file failing after hours of healthy traffic.

    .venv/bin/python -m bench.slo_burn                      # ~3 minutes a run on 2 cores
    .venv/bin/python -m bench.slo_burn --runs 2 --json slo.json --out /tmp/perf.md
    .venv/bin/python -m bench.slo_burn --render slo.json    # the section again from a saved run

Writes its own section of docs/PERFORMANCE.md (`<!-- bench:slo-burn -->`, see bench.sections).

Per run, a fresh served sandbox as the game day starts it (`pipeops.gameday`: its time scale, 1 real
second = 200 virtual ones, and its stack parameters), with the game day's light traffic (one text
file a wave, a wave every `--upload-every` real seconds):

1. Healthy traffic for `--healthy-hours` virtual hours (default 6 h and 10 min: the slow pair's long
   window full of files done on time, as the computed times assume).
2. `function-errors` injected at share 1.0 (`pipeops.faults`, as `pipeops sandbox fault inject`
   does): the detect function fails every invocation, every run ends FAILED, and each of its files
   counts FilesMissed (bad) when the run ends.
3. The clock starts at the first failed file: the first FilesMissed datapoint above 0 (its timestamp,
   read from the sandbox's moto in this process). Measured: when the FilesOnTimeFastBurn composite
   goes to ALARM, the SlowBurn composite's state at that moment, and when SlowBurn goes to ALARM,
   each beside `alarms.slos.time_to_fire_seconds` at a 100% error rate (FastBurn: 14.4 x 0.01 x
   3600 s = 518 s at the default 99% target; SlowBurn: 6 x 0.01 x 21,600 s = 1,296 s).

The alarm engine evaluates once a virtual minute (0.3 real s here), as CloudWatch does: a measured
time is the computed one rounded up to that minute, give or take how steady the file rate is.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from alarms.slos import DEFAULT_TARGET, POLICY, BurnAlert, Indicator, min_files, time_to_fire_seconds
from bench.sections import write_section

SECTION = "slo-burn"
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "docs" / "PERFORMANCE.md"
FAULT = "function-errors"
FAST, SLOW = (next(alert for alert in POLICY if alert.name == name) for name in ("FastBurn", "SlowBurn"))
COMPOSITE = "FilesOnTime{}"  # the pair's composite id
HEALTHY_HOURS = 6 + 10 / 60
UPLOAD_EVERY = 0.5  # real seconds between waves of one file (100 virtual seconds at the game day's scale)
SLOW_MARGIN = 2.0  # the outage lasts until SlowBurn fires, or this many times its computed time


@dataclasses.dataclass
class BurnRun:
    """One run's measurements; times are seconds since the run's clock started (real)."""

    started_at: str
    load: str
    time_scale: float
    upload_every: float
    healthy_good: float  # files counted on time before the injection
    healthy_bad: float  # and missed (late or failed) before it
    healthy_seconds: float  # real
    injected_at: float
    first_failed_at: float | None
    outage_bad: float  # files counted missed from the injection to the end of the run
    outage_good: float
    ended_at: float
    fast_at: float | None  # FilesOnTimeFastBurn to ALARM
    slow_at: float | None
    slow_state_at_fast: str  # SlowBurn's state when FastBurn went to ALARM
    healthy_alarms: list[str]  # burn composites that went to ALARM before the injection
    fast_window: tuple[float, float] = (0.0, 0.0)  # (good, bad) in FastBurn's long window when it fired

    def virtual(self, real: float | None) -> float | None:
        return None if real is None else real / self.time_scale


def since_first_failed(run: BurnRun, at: float | None) -> float | None:
    """Virtual seconds from the first failed file to `at`. Pure."""
    if at is None or run.first_failed_at is None:
        return None
    return (at - run.first_failed_at) / run.time_scale


def per_virtual_hour(files: float, real_seconds: float, time_scale: float) -> float:
    """Files a virtual hour. Pure."""
    return files / (real_seconds / time_scale) * 3_600 if real_seconds > 0 else 0.0


def computed_at_rates(alert: BurnAlert, healthy_rate: float, outage_rate: float) -> float | None:
    """The time to fire when the files' rate changes with the outage (failed runs end at another pace
    than done ones): the long window holds healthy files at `healthy_rate` and bad ones at
    `outage_rate` (files a virtual hour); its bad share r_o t / (r_o t + r_h (W - t)) reaches the
    threshold at t = threshold W r_h / (r_o (1 - threshold) + threshold r_h). Pure."""
    share = time_to_fire_seconds(alert, DEFAULT_TARGET, 1.0)
    if share is None or outage_rate <= 0:
        return None
    limit = share / alert.long_seconds
    return limit * alert.long_seconds * healthy_rate / (outage_rate * (1 - limit) + limit * healthy_rate)


def computed(alert: BurnAlert) -> float:
    """The pair's computed time to fire at 100% failures, virtual seconds from the first failed file."""
    seconds = time_to_fire_seconds(alert, DEFAULT_TARGET, 1.0)
    assert seconds is not None  # every pair fires at 100%
    return seconds


# -- the shell ------------------------------------------------------------------------------------


def indicator_points(region: str) -> list[tuple[dt.datetime, str, float]]:
    """(real time, indicator name, value) of every on-time indicator datapoint the sandbox's moto
    holds: the timestamps as published, finer than any GetMetricData period."""
    from moto.cloudwatch.models import MetricAggregatedDatum, MetricDatum, cloudwatch_backends
    from moto.core import DEFAULT_ACCOUNT_ID

    names = {Indicator.ON_TIME.value, Indicator.MISSED.value, Indicator.OVERDUE.value}
    found = []
    for datum in list(cloudwatch_backends[DEFAULT_ACCOUNT_ID][region].metric_data):
        if datum.name not in names:
            continue
        if isinstance(datum, MetricDatum):
            value = float(datum.value)
        elif isinstance(datum, MetricAggregatedDatum):
            value = float(datum.sum)
        else:
            continue
        moment = datum.timestamp if datum.timestamp.tzinfo else datum.timestamp.replace(tzinfo=dt.UTC)
        found.append((moment, datum.name, value))
    return sorted(found)


def counted(points: Sequence[tuple[dt.datetime, str, float]], start: dt.datetime, end: dt.datetime) -> tuple[float, float]:
    """(good, bad) counted in [start, end). Pure."""
    good = sum(v for at, name, v in points if start <= at < end and name == Indicator.ON_TIME.value)
    bad = sum(v for at, name, v in points if start <= at < end and name != Indicator.ON_TIME.value)
    return good, bad


def run_once(healthy_hours: float, upload_every: float, say: Callable[[str], None]) -> BurnRun:
    """One fresh sandbox: healthy traffic, then every file failing until SlowBurn fires."""
    from pipeops.demo import resources_of, sample_files
    from pipeops.faults import FaultTarget, clear, inject
    from pipeops.gameday.model import AlarmChange
    from pipeops.gameday.observe import Clock, transitions
    from pipeops.gameday.runner import game_day_sandbox
    from pipeops.gameday.timing import GameDaySettings
    from pipeops.gameday.traffic import LIGHT_WAVE, Traffic

    settings = GameDaySettings()
    scale = settings.time_scale
    started_at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    say(f"starting a sandbox at time scale {scale:g}")
    with game_day_sandbox(settings) as sandbox:
        resources = resources_of(sandbox)
        s3 = sandbox.client("s3")
        traffic = Traffic(lambda key, body: s3.put_object(Bucket=resources.InputBucketName, Key=key, Body=body),
                          sample_files(), interval=upload_every, samples=LIGHT_WAVE)
        clock = Clock(dt.datetime.now(dt.UTC), scale)
        traffic.start()
        fast_id, slow_id = COMPOSITE.format(FAST.name), COMPOSITE.format(SLOW.name)

        def first(alarm: str, changes: Sequence[AlarmChange], after: float) -> float | None:
            return next((c.real_at for c in changes if c.alarm == alarm and c.new == "ALARM" and c.real_at >= after), None)

        try:
            healthy = healthy_hours * 3_600 * scale
            say(f"healthy traffic for {healthy_hours:.2f} virtual hours ({healthy:.0f} real s)")
            time.sleep(healthy)
            injected_at = clock.now()
            healthy_alarms = sorted({c.alarm for c in transitions(sandbox, clock) if c.new == "ALARM"
                                     and c.alarm in (fast_id, slow_id, COMPOSITE.format("SteadyBurn"))})
            inject(FaultTarget.of_sandbox(sandbox), FAULT, share=1.0)
            say(f"{FAULT} injected at share 1.0; waiting for {fast_id}, then {slow_id}")
            limit = injected_at + (computed(SLOW) * SLOW_MARGIN + settings.detect_timeout / scale) * scale
            while clock.now() < limit:
                if first(slow_id, transitions(sandbox, clock, injected_at), injected_at) is not None:
                    break
                time.sleep(0.1)
            changes = transitions(sandbox, clock, 0.0)
        finally:
            traffic.stop()
        ended_at = clock.now()
        clear(FaultTarget.of_sandbox(sandbox), FAULT)
        points = indicator_points(sandbox.region)
    at = clock.started + dt.timedelta(seconds=injected_at)
    end = clock.started + dt.timedelta(seconds=ended_at)
    failed = [moment for moment, name, value in points if name == Indicator.MISSED.value and value > 0 and moment >= at]
    healthy_good, healthy_bad = counted(points, clock.started, at)
    outage_good, outage_bad = counted(points, at, end)
    fast_at, slow_at = first(fast_id, changes, injected_at), first(slow_id, changes, injected_at)
    slow_state = "ALARM" if slow_at is not None and fast_at is not None and slow_at <= fast_at else "OK"
    fast_window = (0.0, 0.0)
    if fast_at is not None:
        fired = clock.started + dt.timedelta(seconds=fast_at)
        fast_window = counted(points, fired - dt.timedelta(seconds=FAST.long_seconds * scale), fired)
    return BurnRun(
        started_at=started_at, load=load, time_scale=scale, upload_every=upload_every,
        healthy_good=healthy_good, healthy_bad=healthy_bad, healthy_seconds=injected_at,
        injected_at=injected_at, first_failed_at=clock.since(min(failed)) if failed else None,
        outage_bad=outage_bad, outage_good=outage_good, ended_at=ended_at,
        fast_at=fast_at, slow_at=slow_at, slow_state_at_fast=slow_state, healthy_alarms=healthy_alarms,
        fast_window=fast_window,
    )


# -- the section ----------------------------------------------------------------------------------


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} s"


def _real(run: BurnRun, at: float | None) -> str:
    return "-" if at is None or run.first_failed_at is None else f"{at - run.first_failed_at:.1f} s"


def run_rows(run: BurnRun) -> list[tuple[str, str, str, str]]:
    """(pair, computed virtual, measured virtual, measured real), times from the first failed file. Pure."""
    rows = []
    for alert, at in ((FAST, run.fast_at), (SLOW, run.slow_at)):
        rows.append((f"{COMPOSITE.format(alert.name)} ({alert.burn_rate:g}x over {alert.long_seconds // 3_600} h "
                     f"AND {alert.short_seconds // 60} min)", _s(computed(alert)), _s(since_first_failed(run, at)),
                     _real(run, at)))
    return rows


def figures(run: BurnRun) -> list[tuple[str, str]]:
    """What the computed times assume, as this run met it. Pure."""
    outage = run.ended_at - run.injected_at
    within = since_first_failed(run, run.fast_at)
    healthy_rate = per_virtual_hour(run.healthy_good + run.healthy_bad, run.healthy_seconds, run.time_scale)
    outage_rate = per_virtual_hour(run.outage_bad + run.outage_good, outage, run.time_scale)
    at_rates = computed_at_rates(FAST, healthy_rate, outage_rate)
    good, bad = run.fast_window
    return [
        ("FastBurn fired within its computed time", "-" if within is None else
         f"{'yes' if within <= computed(FAST) + 60 else 'no'} ({within / computed(FAST):.2f}x the computed time)"),
        ("SlowBurn's state when FastBurn fired", run.slow_state_at_fast),
        ("healthy phase: virtual hours; files on time / missed; files a virtual hour",
         f"{run.healthy_seconds / run.time_scale / 3_600:.2f} h; {run.healthy_good:g} / {run.healthy_bad:g}; "
         f"{per_virtual_hour(run.healthy_good + run.healthy_bad, run.healthy_seconds, run.time_scale):.0f}"),
        ("burn composites in ALARM in the healthy phase", ", ".join(run.healthy_alarms) or "none"),
        ("outage: files missed / on time; files a virtual hour",
         f"{run.outage_bad:g} / {run.outage_good:g}; "
         f"{per_virtual_hour(run.outage_bad + run.outage_good, outage, run.time_scale):.0f}"),
        ("injection to the first failed file (virtual, real)",
         "-" if run.first_failed_at is None else
         f"{(run.first_failed_at - run.injected_at) / run.time_scale:,.0f} s, {run.first_failed_at - run.injected_at:.1f} s"),
        ("FastBurn's 1 h window when it fired: bad / files (share; threshold 0.144)",
         f"{bad:g} / {good + bad:g} ({bad / (good + bad):.3f})" if good + bad else "-"),
        ("FastBurn computed at this run's file rates (healthy, outage)", _s(at_rates)),
        ("long windows' minimum-files guard at 99% (FastBurn, SlowBurn)",
         f"{min_files(FAST, DEFAULT_TARGET)}, {min_files(SLOW, DEFAULT_TARGET)} files"),
    ]


def render(runs: Sequence[BurnRun]) -> str:
    """The `slo-burn` section: tables only; what they mean is written by hand beside it. Pure."""
    first = runs[0]
    lines = [
        "## The page alarm's time to fire: every file failing on the sandbox",
        "",
        f"Measured by `python -m bench.slo_burn` on {first.started_at} (a shared 2-core machine), {len(runs)} run(s), "
        f"each on a fresh sandbox at time scale {first.time_scale:g} "
        f"(1 real s = {1 / first.time_scale:.0f} virtual s), a file uploaded every {first.upload_every:g} real s "
        f"({first.upload_every / first.time_scale:.0f} virtual s), `{FAULT}` at share 1.0, target {DEFAULT_TARGET}%. "
        "Times from the first failed file.",
    ]
    for number, run in enumerate(runs, 1):
        lines += [
            "",
            f"Run {number} ({run.started_at}, load average at the start {run.load}):",
            "",
            "| pair | computed (virtual) | measured (virtual) | measured (real) |",
            "|---|---:|---:|---:|",
            *(f"| {' | '.join(row)} |" for row in run_rows(run)),
            "",
            "| figure | this run |",
            "|---|---|",
            *(f"| {name} | {value} |" for name, value in figures(run)),
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.slo_burn", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--healthy-hours", type=float, default=HEALTHY_HOURS, help="virtual hours of healthy traffic")
    parser.add_argument("--upload-every", type=float, default=UPLOAD_EVERY, help="real seconds between uploads")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--json", type=Path, default=None, help="also keep the runs as JSON")
    parser.add_argument("--render", type=Path, default=None, help="only re-render the section from a --json file")
    args = parser.parse_args(argv)
    if args.render:
        runs = [BurnRun(**{**saved, "fast_window": tuple(saved.get("fast_window", (0.0, 0.0)))})
                for saved in json.loads(args.render.read_text(encoding="utf-8"))]
    else:
        def say(line: str) -> None:
            print(line, file=sys.stderr, flush=True)

        runs = [run_once(args.healthy_hours, args.upload_every, say) for _ in range(args.runs)]
        if args.json:
            args.json.write_text(json.dumps([dataclasses.asdict(r) for r in runs], indent=2), encoding="utf-8")
    body = render(runs)
    write_section(args.out, SECTION, body)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
