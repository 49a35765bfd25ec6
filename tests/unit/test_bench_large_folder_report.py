"""The large-folder benchmark's section renderer and its call attribution, on fixed input (no moto, no timing)."""

from __future__ import annotations

import copy
import threading
from types import SimpleNamespace
from typing import Any

from bench.large_folder import (
    HEADING,
    SECTION,
    SPREAD_HEADING,
    SPREAD_SECTION,
    FolderCallCounter,
    calls_by,
    figures,
    per_file,
    render_section,
    render_spread_section,
    router_records,
    upload_offsets,
    write_section,
)


def _call(origin: str, component: str, service: str, operation: str, calls: int) -> dict[str, Any]:
    return {
        "origin": origin,
        "component": component,
        "service": service,
        "operation": operation,
        "calls": calls,
    }


def _size(files: int, wall: float, *, runs: int, upload: float, last: float, cpu: float) -> dict[str, Any]:
    per_run = min(files, 100)
    calls = [
        _call("handler", "RedactFunction", "s3", "GetObject", 3 * files),
        _call("handler", "RedactFunction", "s3", "PutObject", 2 * files),
        _call("handler", "IngestFunction", "dynamodb", "GetItem", 2 * files),
        _call("handler", "IngestFunction", "dynamodb", "TransactWriteItems", files),
        _call("handler", "RouterFunction", "stepfunctions", "StartExecution", runs),
        _call("stepfunctions", "ASL interpreter (Task states)", "lambda", "Invoke", 2 * files + 4 * runs),
        _call("stepfunctions", "ASL interpreter (Task states)", "dynamodb", "UpdateItem", 2 * runs),
        _call("sandbox", "IAM enforcement (on handler threads)", "s3", "HeadObject", 3 * files),
        _call("sandbox", "execution status watcher", "stepfunctions", "ListExecutions", int(5 * wall)),
        _call("driver", "benchmark uploads", "s3", "PutObject", files),
    ]
    timeline = [
        {
            "files": per_run,
            "status": "COMPLETE",
            "created_s": 0.1 + i,
            "execution_start_s": 2.0 + 10.0 * i,
            "execution_stop_s": 2.0 + 10.0 * i + 12.0,
            "terminal_s": 2.1 + 10.0 * i + 12.0,
            "execution_status": "SUCCEEDED",
        }
        for i in range(runs)
    ]
    return {
        "files": files,
        "parameters": {"MaxConcurrentWorkflows": "3"},
        "time_scale": 0.05,
        "upload_s": upload,
        "wall_s": wall,
        "last_terminal_s": last,
        "cpu_s": cpu,
        "idle": True,
        "ok": True,
        "runs": runs,
        "run_statuses": {"COMPLETE": runs},
        "max_files_per_run": per_run,
        "files_missing": 0,
        "files_in_two_runs": 0,
        "handler_pool_calls": files,
        "internal_on_handler_threads": 3 * files,
        "calls": calls,
        "calls_direct_total": sum(c["calls"] for c in calls),
        "timeline": timeline,
        "ingest_done_s": upload + 1.0,
        "ingest_first_tenth_ms": 30.0,
        "ingest_last_tenth_ms": 90.0,
        "bus_workers": 4,
        "settings": {"capacity_retry_seconds": 2.0},
        "max_rss_mb": 300 if files < 1000 else 5120,
        "samples": [],
        "tracker_invocations": [[t["execution_stop_s"], t["execution_stop_s"] + 0.1] for t in timeline],
        "cpu_by_thread": {
            "Step Functions interpreter (_execution_logic)": cpu * 0.5,
            "handler: RedactFunction": cpu * 0.2,
            "other: ThreadPoolExecutor": cpu * 0.05,
            "SQS poller (+ Router invokes, their logs/metrics)": cpu * 0.1,
            "other: bench-upload_0": cpu * 0.05,
            "execution status watcher": cpu * 0.1,
        },
        "functions": {
            "IngestFunction": {
                "invocations": files,
                "errors": {},
                "timeouts": 0,
                "median_ms": 40.0,
                "max_ms": 90.0,
                "total_s": files * 0.04,
            },
            "RedactFunction": {
                "invocations": files,
                "errors": {},
                "timeouts": 0,
                "median_ms": 58.4,
                "max_ms": 99.0,
                "total_s": files * 0.058,
            },
        },
    }


def _stalled(size: dict[str, Any]) -> dict[str, Any]:
    """Three small runs end by 50 s; their slots come back only at ~248 s, when 17 full runs start."""
    first = [(69, 0.1, 2.0, 50.0), (22, 2.7, 6.0, 45.0), (29, 5.7, 9.0, 48.0)]
    rest = [(100, 9.5 + 10 * j, 250.0 + 12 * j, 280.0 + 12 * j) for j in range(17)]
    size["timeline"] = [
        {
            "files": files,
            "status": "COMPLETE",
            "created_s": created,
            "execution_start_s": start,
            "execution_stop_s": stop,
            "terminal_s": stop - 0.1,
            "execution_status": "SUCCEEDED",
        }
        for files, created, start, stop in first + rest
    ]
    size["runs"] = 20
    size["tracker_invocations"] = [[247.0, 247.5], [247.6, 247.8], [248.0, 248.2]] + [
        [stop, stop + 0.1] for _, _, _, stop in rest
    ]
    size["samples"] = [
        {
            "t": float(t),
            "slots_held": 3 if 50 <= t <= 250 else 2,
            "bus_in_flight": max(0, 1500 - 5 * t),
            "main_queue": 17,
        }
        for t in range(0, 500, 5)
    ] + [{"t": 100.5, "error": "ClientError"}]
    size["ingest_done_s"] = 309.0
    return size


RESULTS: dict[str, Any] = {
    "meta": {
        "date": "2026-01-01 00:00 UTC",
        "command": "python -m bench.large_folder",
        "duration_s": 600.0,
        "cores": 2,
        "usable_cores": 2,
        "cpu_model": "AMD EPYC",
        "python": "3.11.7",
        "platform": "Linux-6",
        "moto": "5.2.5",
        "botocore": "1.44.8",
        "upload_threads": 4,
        "load_start": [1.5, 1.0, 1.0],
        "load_end": [3.25, 2.0, 1.0],
    },
    "sizes": [
        _size(10, 4.0, runs=1, upload=0.1, last=3.9, cpu=1.5),
        _size(100, 20.0, runs=1, upload=0.6, last=19.5, cpu=12.0),
        _stalled(_size(2000, 500.0, runs=20, upload=30.0, last=480.0, cpu=520.0)),
    ],
}


def _rows(text: str, header_start: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("| "):
            break
        rows.append(line)
    return rows


def test_section_states_machine_date_and_shared_cores_in_a_table() -> None:
    text = render_section(RESULTS)
    assert text.startswith(HEADING + "\n")
    assert "| measured | 2026-01-01 00:00 UTC with `python -m bench.large_folder` (600 s in all) |" in text
    assert "| cores | 2 usable of 2 (AMD EPYC) |" in text
    assert "| load average, start / end | 1.5 / 3.25 |" in text
    assert "| Python, OS, moto, botocore | 3.11.7, Linux-6, 5.2.5, 1.44.8 |" in text
    assert "| stack parameters | MaxConcurrentWorkflows 3 |" in text and "| time scale; upload threads | 0.05; 4 |" in text
    assert "**Method.**" not in text and "What is slow" not in text  # the prose is written by hand


def test_headline_has_one_row_per_size_with_files_per_second_and_calls_per_file() -> None:
    rows = _rows(render_section(RESULTS), "| files | runs")
    assert len(rows) == 3
    # 10 files: handler 3+2+2+1 per file + 1 StartExecution / 10 = 8.1; state machine (20 + 4 + 2) / 10 = 2.6
    assert rows[0] == (
        "| 10 | 1 (10 files) | 0.10 | 3.90 | 4.00 | **2.50** | 2.56 | **8.10** | 2.60 | 10.70 | 5.00 | 1.50 (0.38x) | yes |"
    )
    # 2,000 files: 16,000 + 20 handler calls; 4,000 + 80 + 40 state machine; 6,000 + 2,500 sandbox
    assert rows[2] == (
        "| 2,000 | 20 (22-100 files) | 30.00 | 480 | 500 | **4.00** | 4.17 | **8.01** | 2.06 | 10.07 | 4.25 | 520 (1.04x) | yes |"
    )


def test_per_file_counts_pool_origin_and_leave_out_the_driver() -> None:
    big = RESULTS["sizes"][2]
    assert per_file(big, "handler") == 16_020 / 2000
    assert per_file(big, "driver") == 1.0
    assert calls_by(big, "stepfunctions") == {
        ("ASL interpreter (Task states)", "lambda", "Invoke"): 4_080,
        ("ASL interpreter (Task states)", "dynamodb", "UpdateItem"): 40,
    }
    assert per_file({"files": 0}, "handler") is None


def test_breakdown_lists_each_maker_busiest_first_with_operations_at_the_largest_size() -> None:
    rows = _rows(render_section(RESULTS), "| made by")
    assert (
        rows[0] == "| handler: RedactFunction | 5.00 | 5.00 | 5.00 | s3 GetObject 3.00, s3 PutObject 2.00 |"
    )
    assert rows[1].startswith("| handler: IngestFunction | 3.00 | 3.00 | 3.00 | dynamodb GetItem 2.00,")
    makers = [row.split(" | ")[0] for row in rows]
    assert makers.index("| handler: RouterFunction") < makers.index(
        "| state machine: ASL interpreter (Task states)"
    )
    assert makers[-2:] == [
        "| sandbox: IAM enforcement (on handler threads)",
        "| sandbox: execution status watcher",
    ]
    assert (
        "| made by | 10 files | 100 files | 2,000 files | most frequent operations (per file at 2,000 files) |"
        in render_section(RESULTS)
    )


def test_cpu_table_groups_threads_and_function_table_shows_count_median_total() -> None:
    text = render_section(RESULTS)
    cpu = _rows(text, "| threads")
    assert cpu[0] == "| Step Functions interpreter (moto) | 0.8 (50%) | 6.0 (50%) | 260.0 (50%) |"
    assert cpu[1] == "| handler threads (+ the pools they start) | 0.4 (25%) | 3.0 (25%) | 130.0 (25%) |"
    assert "| benchmark (uploads, sampler, wait_until_idle) | 0.1 (5%) | 0.6 (5%) | 26.0 (5%) |" in cpu
    functions = _rows(text, "| function")
    assert (
        functions[1]
        == "| RedactFunction | 10 · 58 ms · 0.6 s | 100 · 58 ms · 5.8 s | 2,000 · 58 ms · 116 s |"
    )


def test_figures_give_fixed_cost_cpu_queueing_and_calls() -> None:
    found = dict(figures(RESULTS))
    assert found["files/s on the wall time"] == "2.50 at 10, 5.00 at 100, 4.00 at 2,000"
    assert found["at 10 files: first execution start after the first upload"] == "2.00 s"
    assert found["process CPU / wall time"] == "0.38-1.04x on 2 usable cores"
    assert found["at 2,000 files: CPU a file (interpreter threads / handler threads)"] == "260 ms (50% / 25%)"
    assert found["at 2,000 files: uploads done / last Ingest ended"] == "30.00 s / 309 s"
    assert found["Ingest invocations (median wall ms)"] == "2,000 (40 ms)"
    assert found["Ingest median ms, first tenth / last tenth"] == "30 / 90"
    assert found["at 2,000 files: runs (files each)"] == "20 (22-100)"
    assert found["execution seconds, median (max)"] == "30.00 (48.00)"
    assert found["seconds some execution was running, of the wall time"] == "270 of 500"
    assert found["calls a file by handlers, over the sizes"] == "8.01-8.10"
    assert found["calls a file by the state machine, over the sizes"] == "2.06-2.60"
    assert "5.0 GB after 2,000" in found["peak resident size after each size (cumulative)"]
    assert "| calls a file by handlers, over the sizes | 8.01-8.10 |" in render_section(RESULTS)


def test_a_stall_with_slots_held_and_late_tracker_gives_its_figures() -> None:
    found = dict(figures(RESULTS))
    assert found["at 2,000 files: no execution ran while runs waited (runs waiting)"] == "50.00-250 s, 200 s (17)"
    assert found["slots held in that stall (sampled every second)"] == "3 of 3"
    assert found["the WorkflowTracker's first invocation after the stall began"] == "248 s"
    assert found["event-bus deliveries in flight in the stall, at most"] == "1,225 (4 workers)"  # first sample inside: t=55


def test_no_stall_no_stall_figures() -> None:
    results = copy.deepcopy(RESULTS)
    results["sizes"][2]["timeline"] = results["sizes"][2]["timeline"][:3]
    assert not any("stall" in name or "no execution ran" in name for name, _ in figures(results))


def test_a_failed_size_says_what_went_wrong_and_partial_data_still_renders() -> None:
    results = copy.deepcopy(RESULTS)
    big = results["sizes"][2]
    big.update(ok=False, idle=False, files_missing=3, run_statuses={"COMPLETE": 18, "FAILED": 2})
    big["calls_direct_total"] += 5
    text = render_section(results)
    assert "| **no**: not idle, 3 files in no run, 2 FAILED |" in text
    assert "cross-check disagreed with the event hook at 2,000 files" in text
    assert render_section({}).startswith(HEADING)
    assert figures({"sizes": [{"files": 10}]}) == []
    assert dict(figures({"sizes": [{"files": 10, "wall_s": 5.0}]}))["files/s on the wall time"] == "2.00 at 10"


def test_write_section_replaces_only_its_own_block(tmp_path) -> None:
    out = tmp_path / "PERFORMANCE.md"
    out.write_text(
        "# Performance\n\nThe e2e report.\n\n<!-- bench:reconcile -->\nkept\n<!-- /bench:reconcile -->\n"
    )
    write_section(out, RESULTS)
    first = out.read_text()
    assert first.startswith(
        "# Performance\n\nThe e2e report.\n\n<!-- bench:reconcile -->\nkept\n<!-- /bench:reconcile -->\n\n"
    )
    assert f"<!-- bench:{SECTION} -->\n{HEADING}" in first
    write_section(out, RESULTS)
    assert out.read_text() == first


def _model(service: str, name: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, service_model=SimpleNamespace(service_name=service))


def _count_in_thread(
    counter: FolderCallCounter, thread_name: str, model: SimpleNamespace, agent: str
) -> None:
    def call() -> None:
        assert (
            counter._before_call(model=model, request_signer=None, params={"headers": {"User-Agent": agent}})
            is None
        )

    worker = threading.Thread(target=call, name=thread_name)
    worker.start()
    worker.join()


def test_counter_gives_uploads_to_the_driver_and_iam_checks_on_handler_threads_to_the_sandbox() -> None:
    counter = FolderCallCounter()  # not installed: _before_call is driven by hand
    counter.enabled = True
    counter.name_functions({"stack-Redact-ABC": "RedactFunction"})
    _count_in_thread(counter, "bench-upload_0", _model("s3", "PutObject"), "Boto3/1")
    _count_in_thread(counter, "lambda:stack-Redact-ABC:1", _model("s3", "GetObject"), "Boto3/1")
    _count_in_thread(
        counter, "lambda:stack-Redact-ABC:1", _model("s3", "HeadObject"), "Boto3/1 pipeops-sandbox-internal"
    )
    rows, _ = counter.snapshot()
    assert {(r["origin"], r["component"], r["operation"]) for r in rows} == {
        ("driver", "benchmark uploads", "PutObject"),
        ("handler", "RedactFunction", "GetObject"),
        ("sandbox", "IAM enforcement (on handler threads)", "HeadObject"),
    }
    assert counter.internal_on_handler_threads == 1
    counter.reset()
    assert counter.snapshot() == ([], 0) and counter.internal_on_handler_threads == 0


# -- a folder uploaded over time (--spread): the folder-over-time section ---------------------------


def test_uploads_are_spread_evenly_from_the_first_to_the_last() -> None:
    assert upload_offsets(5, 60.0) == [0.0, 15.0, 30.0, 45.0, 60.0]
    assert upload_offsets(3, 0.0) == [0.0, 0.0, 0.0]
    assert upload_offsets(1, 60.0) == [0.0]


def test_router_records_count_outcomes_and_failed_records_by_reason() -> None:
    lines = [
        {"message": "message routed", "outcome": "started"},
        {"message": "message routed", "outcome": "resent"},
        {"message": "message routed", "outcome": "resent"},
        {"message": "message routed", "outcome": "waiting"},
        {"message": "job message not routed; SQS retries it, then the DLQ", "reason": "aws_error"},
        {"message": "something else", "outcome": "started"},
    ]
    assert router_records(lines) == {
        "router_outcomes": {"started": 1, "resent": 2, "waiting": 1},
        "router_failures": {"aws_error": 1},
    }


def _spread_results() -> dict[str, Any]:
    size = _size(500, 70.0, runs=5, upload=60.0, last=66.5, cpu=90.0)
    size.update(
        spread_s=60.0,
        router_outcomes={"started": 5, "resent": 7, "waiting": 2},
        router_failures={},
        settings={"capacity_retry_seconds": 2.0, "folder_settle_seconds": 2.0},
    )
    failing = copy.deepcopy(size)
    failing.update(router_failures={"contention": 3}, last_terminal_s=90.0)
    return {"meta": {**RESULTS["meta"], "spread_s": [60.0]}, "sizes": [size, failing]}


def test_the_spread_section_shows_re_sends_failed_records_and_the_longest_wait() -> None:
    text = render_spread_section(_spread_results())
    assert text.startswith(SPREAD_HEADING + "\n")
    assert "| FolderSettleSeconds / capacity re-send delay, scaled | 2 s / 2 s |" in text
    rows = _rows(text, "| files | uploaded over s")
    # the fixture's runs overlap (12 s each, 10 s apart): no time without a running execution
    assert rows[0] == "| 500 | 60.00 | 5 (100 files) | 5 · **7** · 2 | **0** | 6.50 | 0 | 70.00 | yes |"
    assert rows[1].split(" | ")[4:6] == ["**3** (contention 3)", "30.00"]
    assert "**Method.**" not in text  # the prose is written by hand


def test_write_section_puts_a_spread_run_in_its_own_section(tmp_path) -> None:
    out = tmp_path / "PERFORMANCE.md"
    write_section(out, RESULTS)
    write_section(out, _spread_results())
    text = out.read_text()
    assert f"<!-- bench:{SECTION} -->\n{HEADING}" in text
    assert f"<!-- bench:{SPREAD_SECTION} -->\n{SPREAD_HEADING}" in text
