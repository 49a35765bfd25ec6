"""Telemetry per invocation: our handler wrapper against the bare libraries, in one run.

"Telemetry per invocation" is one log line, one metric and one span through our handler wrapper
(`pipeline.telemetry.handler.instrumented` around a body that calls `emit` once and `logger.info`
once). The bare libraries do the same beside it in the same interpreter: a powertools `Logger().info`,
a powertools `Metrics` add_metric + flush_metrics (the same two dimensions, set once as defaults) and
one OpenTelemetry span from the same tracer provider, nested in one function (the comparison), and
each timed apart. Output goes to /dev/null for both. Each round times every variant back to back
(`--number` calls each, the order reversed every other round); medians over `--repeat` rounds, and
the median of the per-round ratios ours / bare, which a shared machine's load affects least.

Two scenarios, each in a fresh interpreter (a tracer provider can be set once per process):
- `default`: no exporter configured: the OpenTelemetry API alone (its no-op tracer), the goal row;
- `sdk`: an SDK TracerProvider without processors set before the handlers import (what a test or the
  sandbox does), both sides then record real spans: reported in the row's detail.

    .venv/bin/python -m bench.telemetry_cost [--repeat 41 --number 200]
    .venv/bin/python -m bench.telemetry_cost --scenario default   # one scenario, in this interpreter
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.goal_row import GoalRow
from pipeline.stack import SERVICE_NAME, SERVICE_NAME_ENV

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("default", "sdk")
REPEAT = 41
NUMBER = 200


class _Context:
    """The attributes of a Lambda context our wrapper reads."""

    function_name = "BenchFunction"
    aws_request_id = "00000000-0000-0000-0000-000000000000"
    memory_limit_in_mb = 512


def _variants(scenario: str) -> dict[str, Callable[[], Any]]:
    """Every timed callable, built after the scenario's tracer provider is in place."""
    from opentelemetry import trace

    if scenario == "sdk":
        from opentelemetry.sdk.trace import TracerProvider

        trace.set_tracer_provider(TracerProvider())
    from aws_lambda_powertools import Logger, Metrics
    from aws_lambda_powertools.metrics import MetricUnit

    from pipeline.telemetry import emit, logger
    from pipeline.telemetry.catalog import Metric
    from pipeline.telemetry.handler import instrumented

    context = _Context()

    @instrumented("bench")
    def ours_full(event: Any, context: Any) -> None:
        emit(Metric.FILES_DETECTED)
        logger.info("file scanned")

    @instrumented("bench")
    def ours_wrapper_only(event: Any, context: Any) -> None:
        return None

    @instrumented("bench")
    def ours_metric_only(event: Any, context: Any) -> None:
        emit(Metric.FILES_DETECTED)

    bare_logger = Logger(service="bench-bare")  # binds sys.stdout now: /dev/null
    bare_metrics = Metrics(namespace="PipeOpsBench", service="bench-bare")
    bare_metrics.set_default_dimensions(stage="dev", function=_Context.function_name)
    bare_tracer = trace.get_tracer("bench.bare")
    count = MetricUnit.Count

    def bare_log() -> None:
        bare_logger.info("file scanned")

    def bare_metric() -> None:
        bare_metrics.add_metric(name="FilesDetected", unit=count, value=1)
        bare_metrics.flush_metrics()

    def bare_span() -> None:
        with bare_tracer.start_as_current_span("bench.bare"):
            pass

    def bare_full() -> None:
        with bare_tracer.start_as_current_span("bench.bare"):
            bare_metrics.add_metric(name="FilesDetected", unit=count, value=1)
            bare_logger.info("file scanned")
            bare_metrics.flush_metrics()

    return {
        "ours": lambda: ours_full({}, context),
        "bare": bare_full,
        "ours_wrapper": lambda: ours_wrapper_only({}, context),
        "ours_wrapper_metric": lambda: ours_metric_only({}, context),
        "ours_log": lambda: logger.info("file scanned"),
        "bare_log": bare_log,
        "bare_metric": bare_metric,
        "bare_span": bare_span,
    }


def run_scenario(scenario: str, repeat: int = REPEAT, number: int = NUMBER) -> dict[str, float]:
    """Median µs per call of each variant in this interpreter, and the median of the per-round ratios
    ours / bare (`ratio_bare`: the three nested; `ratio_parts`: their sum). A shared machine slows
    whole stretches of time at once: a round's samples are taken back to back (their order reversed
    every other round), so a ratio compares samples that saw the same load."""
    real_stdout = sys.stdout
    with open(os.devnull, "w", encoding="utf-8") as sink:
        sys.stdout = sink
        try:
            variants = _variants(scenario)
            samples: dict[str, list[float]] = {name: [] for name in variants}
            for call in variants.values():  # warm: the cold start and first-use caches are not per invocation
                for _ in range(50):
                    call()
            order = list(variants.items())
            for round_ in range(repeat):
                gc.collect()
                for name, call in order if round_ % 2 == 0 else reversed(order):
                    started = time.perf_counter()
                    for _ in range(number):
                        call()
                    samples[name].append(1e6 * (time.perf_counter() - started) / number)
        finally:
            sys.stdout = real_stdout
    result = {name: statistics.median(values) for name, values in samples.items()}
    parts = [sum(round_) for round_ in zip(samples["bare_log"], samples["bare_metric"], samples["bare_span"], strict=True)]
    result["ratio_bare"] = statistics.median(o / b for o, b in zip(samples["ours"], samples["bare"], strict=True))
    result["ratio_parts"] = statistics.median(o / b for o, b in zip(samples["ours"], parts, strict=True))
    return result


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "POWERTOOLS_"))}
    env.update({SERVICE_NAME_ENV: SERVICE_NAME, "POWERTOOLS_LOG_LEVEL": "INFO"})
    return env


def measure_scenario(scenario: str, repeat: int = REPEAT, number: int = NUMBER) -> dict[str, float]:
    """`run_scenario` in a fresh interpreter (its own tracer provider, no other bench's state)."""
    completed = subprocess.run(
        [sys.executable, "-m", "bench.telemetry_cost", "--scenario", scenario, "--repeat", str(repeat),
         "--number", str(number), "--json"],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env=_env(),
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"telemetry scenario {scenario} failed: {completed.stderr.strip()[-500:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def budget(result: Mapping[str, float]) -> float:
    """The bare libraries' parts timed apart and summed: log line + metric add/flush + span."""
    return result["bare_log"] + result["bare_metric"] + result["bare_span"]


def rows(results: Mapping[str, Mapping[str, float]], repeat: int, number: int) -> list[GoalRow]:
    """The goal row: the default deployment (no exporter), the SDK scenario beside it. Pure."""
    default = results["default"]
    ours, bare, parts = default["ours"], default["bare"], budget(default)
    wrapper, metric = default["ours_wrapper"], default["ours_wrapper_metric"] - default["ours_wrapper"]
    sdk = results.get("sdk")
    sdk_note = (
        f" With an SDK TracerProvider set (a recording span for both): ours {sdk['ours']:.0f} µs, bare "
        f"{sdk['bare']:.0f} µs, ratio {sdk['ratio_bare']:.2f} (against the parts: {sdk['ratio_parts']:.2f})."
        if sdk
        else ""
    )
    return [
        GoalRow(
            measure="telemetry per invocation (one log line, one metric, one span)",
            now=f"{ours:.0f} µs = {default['ratio_bare']:.2f} of the bare libraries ({bare:.0f} µs, same run)",
            goal="≤ 72 µs: no more than the bare libraries",
            met=default["ratio_bare"] <= 1.0,
            detail=(
                f"no exporter configured (the OpenTelemetry API alone); {repeat} rounds of {number} invocations "
                f"per variant, medians, ratio = median of the per-round ratios (the machine was shared: whole "
                f"stretches run slower, a round's samples see the same load). Ours, through `instrumented` "
                f"(emit once, logger.info once): {ours:.1f} µs = wrapper (Lambda context keys, span, metric "
                f"collection) {wrapper:.1f} + one emit and its EMF flush {metric:.1f} + the log line "
                f"{default['ours_log']:.1f} (measured alone, without the context keys). Bare, same run: powertools "
                f"Logger.info {default['bare_log']:.1f}, powertools Metrics add_metric+flush "
                f"{default['bare_metric']:.1f}, OTel span {default['bare_span']:.1f}; the three nested in one "
                f"function {bare:.1f} (the comparison), timed apart and summed {parts:.1f} (ours / that sum: "
                f"{default['ratio_parts']:.2f}).{sdk_note}"
            ),
        )
    ]


def measure(repeat: int = REPEAT, number: int = NUMBER) -> list[GoalRow]:
    return rows({scenario: measure_scenario(scenario, repeat, number) for scenario in SCENARIOS}, repeat, number)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.telemetry_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=SCENARIOS, help="run one scenario in this interpreter")
    parser.add_argument("--repeat", type=int, default=REPEAT)
    parser.add_argument("--number", type=int, default=NUMBER)
    parser.add_argument("--json", action="store_true", help="print the scenario's medians as JSON")
    args = parser.parse_args(argv)
    if args.scenario:
        result = run_scenario(args.scenario, args.repeat, args.number)
        print(json.dumps(result) if args.json else "\n".join(f"{k}: {v:.2f}" for k, v in result.items()))
        return 0
    for row in measure(args.repeat, args.number):
        print(f"{row.measure}: {row.now} (goal {row.goal}; {'met' if row.met else 'NOT met'})")
        print(f"  {row.detail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
