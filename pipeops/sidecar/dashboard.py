"""The sidecar's operations dashboard: the same builder as the stack's (`dashboards.build`), with
sections for a pipeline we did not build. Its watched resources are named literally (as its alarms'),
the counter's numbers are the sidecar reconciler's metrics, and every alarm is drawn on its chart."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from alarms.catalog import AlarmSpec
from dashboards.build import (
    OPERATIONS,
    OPERATIONS_SUFFIX,
    Chart,
    Section,
    aws,
    body_text,
    limit,
    operations_body,
    ours,
    sub,
)
from pipeline.stack import Function
from pipeline.telemetry.aws_catalog import ResourceKind
from pipeline.telemetry.catalog import Metric
from pipeops.sidecar.config import FixedMax, SidecarConfig
from pipeops.sidecar.names import RECONCILER_TIMEOUT, function_id, pascal

RECONCILER = Function.RECONCILER


def _queue_and_counter(config: SidecarConfig) -> list[Chart]:
    q, main = ResourceKind.QUEUE, config.main_queue.name
    maximum = config.counter.max
    return [
        Chart(
            f"{main}: visible and in flight",
            [
                aws(q, "ApproximateNumberOfMessagesVisible", "MainQueue", label="visible", dimension=main),
                aws(q, "ApproximateNumberOfMessagesNotVisible", "MainQueue", label="in flight", dimension=main),
            ],
        ),
        Chart(
            f"Counter {config.counter.count_attribute} vs running executions",
            [
                ours(Metric.CONCURRENCY_ACTIVE, RECONCILER, stat="Average", label="counted (avg)"),
                ours(Metric.CONCURRENCY_ACTIVE, RECONCILER, stat="Minimum", label="counted (min)"),
                ours(Metric.WORKFLOWS_RUNNING, RECONCILER, label="running"),
            ],
            limits=[limit("max", maximum.value)] if isinstance(maximum, FixedMax) else [],
        ),
        Chart(
            "Counter drift (counted - running)",
            [
                ours(Metric.COUNTER_DRIFT, RECONCILER, stat="Minimum", label="drift (min)"),
                ours(Metric.COUNTER_DRIFT, RECONCILER, stat="Maximum", label="drift (max)"),
            ],
        ),
    ]


def _executions(config: SidecarConfig) -> list[Chart]:
    sm = ResourceKind.STATE_MACHINE
    charts = []
    for machine in config.state_machines:
        arn, logical_id = machine.arn_expression(), pascal(machine.name)

        def row(name: str, label: str, arn: Any = arn, logical_id: str = logical_id) -> list[Any]:
            return aws(sm, name, logical_id, label=label, dimension=arn)

        charts += [
            Chart(
                f"{machine.name}: started, succeeded, throttled",
                [row("ExecutionsStarted", "started"), row("ExecutionsSucceeded", "succeeded"), row("ExecutionThrottled", "throttled")],
            ),
            Chart(
                f"{machine.name}: failed, timed out, aborted",
                [row("ExecutionsFailed", "failed"), row("ExecutionsTimedOut", "timed out"), row("ExecutionsAborted", "aborted")],
            ),
        ]
    return charts


def _reconciler() -> list[Chart]:
    return [
        Chart("Sidecar reconciler runs (heartbeat)", [ours(Metric.RECONCILE_RUNS, RECONCILER, label="runs")]),
        Chart(
            "Stall signals and a blind observer",
            [
                ours(Metric.SLOTS_FULL_IDLE, RECONCILER, label="slots full, idle"),
                ours(Metric.BACKLOG_STALLED, RECONCILER, label="backlog stalled"),
                ours(Metric.IMPLAUSIBLE_DRIFT, RECONCILER, label="implausible drift"),
            ],
        ),
    ]


def _functions(config: SidecarConfig) -> list[Chart]:
    """The named functions and the sidecar's reconciler side by side; each duration against its timeout."""
    fn = ResourceKind.FUNCTION
    named = [(function_id(f.ref.name), f.ref.name, f.timeout_seconds) for f in config.functions]
    every: list[tuple[str, Any, int | None]] = [*named, (RECONCILER.value, None, None)]

    def by_function(name: str) -> list[list[Any]]:
        return [aws(fn, name, logical_id, label=logical_id.removesuffix("Function"), dimension=value) for logical_id, value, _ in every]

    charts = [
        Chart("Errors by function", by_function("Errors")),
        Chart("Throttles by function", by_function("Throttles")),
        Chart("Invocations by function", by_function("Invocations")),
    ]
    timed = [(logical_id, value, timeout) for logical_id, value, timeout in named if timeout] + [(RECONCILER.value, None, RECONCILER_TIMEOUT)]
    for logical_id, value, timeout in timed:
        charts.append(
            Chart(
                f"{logical_id.removesuffix('Function')}: duration p99 (ms), timeout {timeout} s",
                [aws(fn, "Duration", logical_id, stat="p99", label="p99", dimension=value)],
                limits=[limit(f"timeout {timeout} s", (timeout or 0) * 1000)],
            )
        )
    return charts


def sections(config: SidecarConfig) -> list[Section]:
    return [
        ("## The queue, the counter (sampled by the sidecar's reconciler) and executions", _queue_and_counter(config) + _executions(config)),
        (
            "## Dead-letter queues: each message is work that failed every retry",
            [
                Chart(
                    "Dead-letter queues: messages",
                    [
                        aws(ResourceKind.QUEUE, "ApproximateNumberOfMessagesVisible", "Dlq", label=dlq.name, dimension=dlq.name)
                        for dlq in config.dead_letter_queues
                    ],
                )
            ],
        ),
        ("## The sidecar's reconciler", _reconciler()),
        ("## Functions side by side, and p99 duration against each timeout", _functions(config)),
    ]


def resources(config: SidecarConfig, specs: Sequence[AlarmSpec], template: Mapping[str, Any]) -> dict[str, Any]:
    """The operations dashboard resource (`<stack>-operations`), every alarm of `specs` on its chart."""
    body = operations_body(specs, template, sections(config), drilldown=False)
    return {
        OPERATIONS: {
            "Type": "AWS::CloudWatch::Dashboard",
            "Properties": {
                "DashboardName": {"Fn::Sub": f"{sub('AWS::StackName')}-{OPERATIONS_SUFFIX}"},
                "DashboardBody": {"Fn::Sub": body_text(body, template)},
            },
        }
    }
