"""The benchmark's report renderer on fixed input: sections, pooled per-job numbers, spreads.

No timing here: the numbers below are made up, the renderer only has to present them faithfully.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bench.report import calls_per_job, derived, render, spread


def _run(wall: float, jobs: int, *, router_waits: int, direct_extra: int = 0) -> dict[str, Any]:
    calls = [
        {"origin": "handler", "component": "RouterFunction", "service": "dynamodb", "operation": "UpdateItem", "calls": 5 * jobs},
        {"origin": "handler", "component": "IngestFunction", "service": "sqs", "operation": "SendMessage", "calls": jobs},
        {"origin": "handler", "component": "RouterFunction", "service": "sqs", "operation": "SendMessage", "calls": router_waits},
        {"origin": "stepfunctions", "component": "ASL interpreter (Task states)", "service": "lambda", "operation": "Invoke", "calls": 4 * jobs},
        {"origin": "stepfunctions", "component": "ASL interpreter (Task states)", "service": "dynamodb", "operation": "UpdateItem", "calls": 5 * jobs},
        {"origin": "sandbox", "component": "Lambda runtime: logs + EMF metrics", "service": "logs", "operation": "PutLogEvents", "calls": 7 * jobs},
        {"origin": "driver", "component": "benchmark uploads", "service": "s3", "operation": "PutObject", "calls": jobs},
    ]
    return {
        "startup_s": 0.5,
        "warmup_s": 1.1,
        "upload_s": 1.0,
        "wall_s": wall,
        "work_s": wall - 0.3,
        "cpu_s": wall * 0.9,
        "files": jobs,
        "jobs_expected": jobs,
        "runs": jobs,
        "run_statuses": {"COMPLETE": jobs},
        "executions": jobs,
        "ok": True,
        "idle": True,
        "files_per_s": jobs / wall,
        "jobs_per_s": jobs / wall,
        "execution_median_s": 2.5,
        "execution_p90_s": 3.5,
        "execution_occupancy": 7.0,
        "load_before": [1.0, 1.0, 1.0],
        "load_after": [1.5, 1.2, 1.0],
        "calls": calls,
        "calls_direct_total": sum(c["calls"] for c in calls) + direct_extra,
        "cpu_by_thread": {
            "Step Functions interpreter (_execution_logic)": 0.15 * jobs,
            "handler: RouterFunction": 0.02 * jobs,
        },
        "functions": {
            "RouterFunction": {"invocations": 3, "errors": {}, "timeouts": 0, "median_ms": 800.0, "total_s": 2.4},
            "DetectFunction": {"invocations": jobs, "errors": {}, "timeouts": 0, "median_ms": 60.0, "total_s": 0.06 * jobs},
        },
        "state_times": [
            {"(execution)": 2.5, "(transitions)": 17.0, "(failed events)": 0.0, "DetectPII": 0.4, "DetectFile": 0.2},
        ],
        "top_level_states": ["DetectPII", "Done"],
        "asl_parse_ms": 90.0,
        "settings": {
            "time_scale": 0.05,
            "max_concurrent_workflows": 10,
            "folder_settle_seconds": 2.0,
            "capacity_retry_seconds": 2.0,
            "router_timeout_real_s": 3.0,
            "router_batch_size": 10,
            "router_batching_window_real_s": 0.25,
            "main_queue_visibility_real_s": 18.25,
            "status_watcher_interval_s": 0.2,
        },
    }


RESULTS: dict[str, Any] = {
    "meta": {
        "date": "2026-01-01 00:00 UTC",
        "command": "python -m bench.e2e --quick",
        "files": 10,
        "files_per_folder": 5,
        "root_share": 0.2,
        "repeat": 3,
        "time_scale": 0.05,
        "warmup": True,
        "cores": 2,
        "usable_cores": 2,
        "cpu_model": "Test CPU",
        "python": "3.11.7",
        "moto": "5.2.5",
        "boto3": "1.44.8",
        "botocore": "1.44.8",
        "load_start": [0.5, 0.4, 0.3],
        "load_end": [1.5, 1.0, 0.5],
        "duration_s": 60.0,
        "bytes_median": 4096,
    },
    "configs": [
        {
            "name": "single",
            "description": "one file per job",
            "parameters": {"JobFolderDepth": "0"},
            "runs": [_run(2.0, 10, router_waits=10), _run(3.0, 30, router_waits=0), _run(2.5, 20, router_waits=0)],
        },
    ],
    "raw_moto": [
        {
            "key": "dynamodb_conditional_update",
            "operation": "DynamoDB conditional update_item",
            "unit": "ops/s",
            "count": 400,
            "samples": [700.0, 650.0, 720.0],
            "median": 700.0,
        },
        {"key": "client_creation", "operation": "boto3 client creation", "unit": "ms", "count": 40, "samples": [4.0], "median": 4.0},
    ],
}


def test_spread_formats_median_and_range() -> None:
    assert spread([2.0, 3.0, 2.5]) == "2.50 (2.00-3.00)"
    assert spread([4.0]) == "4.00"
    assert spread([]) == "-"
    assert spread([None, 1.0, None]) == "1.00"
    assert spread([1200.0, 1000.0]) == "1,100 (1,000-1,200)"


def test_calls_per_job_pools_runs_by_completed_jobs() -> None:
    per_job = calls_per_job(RESULTS["configs"][0], "handler")
    assert per_job[("RouterFunction", "dynamodb", "UpdateItem")] == pytest.approx(5.0)
    assert per_job[("RouterFunction", "sqs", "SendMessage")] == pytest.approx(10 / 60)
    assert ("ASL interpreter (Task states)", "lambda", "Invoke") not in per_job
    assert calls_per_job(RESULTS["configs"][0], "stepfunctions")[("ASL interpreter (Task states)", "lambda", "Invoke")] == 4.0


def test_render_has_every_table_and_the_numbers_and_no_title_or_analysis() -> None:
    """The section holds tables; the title and what the numbers mean are written by hand around it."""
    text = render(RESULTS)
    assert not text.startswith("# ")
    for heading in (
        "## Machine",
        "## Parameters of this run",
        "## Headline: whole-pipeline throughput",
        "## Sandbox start-up",
        "## Per run",
        "## AWS API calls per job",
        "### Made by the handlers",
        "### Made by Step Functions",
        "## Where the time goes",
        "## Raw moto throughput",
        "## Figures the analysis reads",
    ):
        assert heading in text, heading
    assert "What is slow" not in text and "**The sandbox is CPU-bound" not in text
    assert "2026-01-01 00:00 UTC" in text
    assert "`python -m bench.e2e --quick`" in text
    assert "5.2.5 / 1.44.8 / 1.44.8" in text
    assert "| `single` | 10 | 20 (10-30) | 3 | 2.50 (2.00-3.00) |" in text  # jobs and wall: median (min-max)
    assert "700 (650-720) ops/s" in text
    assert "| time scale | 0.05 |" in text and "| concurrency slots | 10 |" in text
    assert "every call was seen" in text


def test_handler_breakdown_is_sorted_by_calls_per_job_with_a_total() -> None:
    text = render(RESULTS)
    section = text.split("### Made by the handlers", 1)[1].split("###", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows[0] == "| dynamodb | UpdateItem | RouterFunction | 5.00 |"
    assert rows[1] == "| sqs | SendMessage | IngestFunction | 1.00 |"
    assert rows[-1] == "| **total** |  |  | **6.2** |"


def test_cross_check_mismatch_is_flagged() -> None:
    results = copy.deepcopy(RESULTS)
    results["configs"][0]["runs"][0]["calls_direct_total"] += 3
    assert "**they differ**" in render(results)


def test_the_figures_the_analysis_reads_are_computed_from_the_numbers() -> None:
    figures = dict(derived(RESULTS))
    assert figures["process CPU / wall time, per run"] == "0.90x (3 runs)"
    assert figures["moto's parse of the definition (top-level states)"] == "90 ms (2)"
    assert figures["Task calls per job by the interpreter"] == "9"  # 4 Invoke + 5 UpdateItem by the interpreter
    assert figures["Lambda timeouts in the timed windows"] == "0"
    assert figures["router batch, median per run"] == "800 ms"
    assert figures["failed Lambda invocations in the timed windows"] == "0"
    assert "| Lambda timeouts in the timed windows | 0 |" in render(RESULTS)


def test_render_survives_empty_and_partial_results() -> None:
    assert render({}).startswith("Measured by `python -m bench.e2e`")
    partial = copy.deepcopy(RESULTS)
    for run in partial["configs"][0]["runs"]:
        for key in ("cpu_by_thread", "state_times", "settings", "functions", "calls"):
            run.pop(key)
    partial["raw_moto"] = []
    text = render(partial)
    assert "## Headline: whole-pipeline throughput" in text
    assert "## Raw moto throughput" not in text


def test_failures_are_listed_and_environment_key_errors_explained() -> None:
    results = copy.deepcopy(RESULTS)
    run = results["configs"][0]["runs"][1]
    run["ok"] = False
    run["run_statuses"] = {"COMPLETE": 29, "FAILED": 1}
    run["error_samples"] = [{"function": "RouterFunction", "error_type": "Sandbox.Timedout", "message": "Task timed out after 60.00 seconds"}]
    run["functions"]["RouterFunction"]["timeouts"] = 1
    run["failed_executions"] = [
        {
            "name": "job-1",
            "status": "FAILED",
            "error": "Exception",
            "cause": "'STATE_MACHINE_ARN'",
            "events": [{"type": "LambdaFunctionFailed", "error": "Exception", "cause": "'STATE_MACHINE_ARN'"}],
        }
    ]
    text = render(results)
    section = text.split("## Failures seen in the timed runs", 1)[1].split("\n## ", 1)[0]
    assert "| `single` 2 | RouterFunction invocation failed | Sandbox.Timedout: Task timed out after 60.00 seconds |" in section
    assert "| `single` 2 | execution FAILED | LambdaFunctionFailed Exception: 'STATE_MACHINE_ARN' |" in section
    assert "| 3.00 | 2.70 | 29 / 30 |" in text  # wall, last work, completed jobs against expected
    assert "Runs with a Lambda timeout (`single` 2) carry an extra visibility timeout" in text
    figures = dict(derived(results))
    assert figures["errors that are an environment variable's name (os.environ raced)"] == "'STATE_MACHINE_ARN'"
    assert figures["Lambda timeouts in the timed windows"] == "1"
    assert "## Failures seen" not in render(RESULTS)


def test_retried_failures_are_counted_from_the_sampled_histories() -> None:
    key = "failed events in 3 sampled and the failed executions (with an error a Retry lists)"
    assert dict(derived(RESULTS))[key] == "0 (0)"
    results = copy.deepcopy(RESULTS)
    results["configs"][0]["runs"][0]["state_times"][0]["(failed events)"] = 2.0
    results["configs"][0]["runs"][0]["state_times"][0]["(retried failures)"] = 2.0
    assert dict(derived(results))[key] == "2 (2)"
