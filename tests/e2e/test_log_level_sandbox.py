"""The template's LogLevel on the sandbox, which models Lambda's advanced logging controls
(sandbox.lambda_logging): the level asked for holds although powertools gives Lambda's
AWS_LAMBDA_LOG_LEVEL precedence, and no EMF metric is lost to Lambda's log-level filter."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_pipeline_e2e import (
    FUNCTION_OUTPUTS,
    catalog_metrics,
    json_lines,
    run_a_small_workload,
)


def log_group_lines(sandbox: Any, function: str) -> list[str]:
    logs = sandbox.client("logs")
    group = f"/aws/lambda/{function}"
    if not logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]:
        return []
    pages = logs.get_paginator("filter_log_events").paginate(logGroupName=group)
    return [event["message"] for page in pages for event in page["events"]]


@pytest.mark.parametrize(
    ("level", "allowed"), [("ERROR", {"ERROR", "CRITICAL"}), ("INFO", {"INFO", "WARNING", "ERROR", "CRITICAL"})]
)
def test_log_level_holds_and_emf_metrics_still_arrive(make_sandbox: Any, level: str, allowed: set[str]) -> None:
    sandbox = make_sandbox(LogLevel=level)
    run_a_small_workload(sandbox)
    functions = {sandbox.outputs[o] for o in FUNCTION_OUTPUTS if o in sandbox.outputs}
    records = [
        doc
        for function in sorted(functions)
        for doc in json_lines(log_group_lines(sandbox, function))
        if "_aws" not in doc and "level" in doc
    ]
    levels = {doc["level"] for doc in records}
    assert levels <= allowed, f"LogLevel {level}: the log groups hold {sorted(levels)}"
    if level == "INFO":
        assert "INFO" in levels, "an INFO run logs its steps"
    names = {metric["MetricName"] for metric in catalog_metrics(sandbox)}
    assert {"FilesIngested", "JobsStarted", "FilesDetected", "JobDuration"} <= names, sorted(names)
