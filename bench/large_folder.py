"""One folder of 10, 100 and 2,000 files through the sandbox: files/s and API calls per file.

    .venv/bin/python -m bench.large_folder                       # 10, 100, 2,000 files: ~10 min on 2 cores
    .venv/bin/python -m bench.large_folder --sizes 10,100 --out /tmp/perf.md   # ~1 minute
    .venv/bin/python -m bench.large_folder --json r.json         # keep the raw results
    .venv/bin/python -m bench.large_folder --render r.json       # only re-render the section
    .venv/bin/python -m bench.large_folder --sizes 500 --spread 60,15   # files still arriving: ~3 minutes

Writes its own section of docs/PERFORMANCE.md (`<!-- bench:large-folder -->`, see bench.sections)
and leaves the rest of the file alone. With `--spread S` the folder's files are uploaded evenly over
S seconds instead of at once (its runs are routed while files still join them), and the run writes
the `folder-over-time` section instead: how the router met those runs, and whether anything stalled.

One run, one process. For each size, a fresh `Sandbox` as tests/e2e/test_large_folder.py starts it
(template.yaml deployed, AWS's size limits on, its `PARAMETERS`: default `MaxFilesPerRun` 100,
`MaxConcurrentWorkflows` 3; default time scale 0.05), one warm-up file at the bucket root processed
to idle, then that test's files (`FOLDER`doc-NNNNN.txt, `body(i)`) uploaded by 4 threads, as the
test does, and the wall time from the first upload until `wait_until_idle` returns. Afterwards the
tracking table is read as the test reads it: every file in exactly one run, every run COMPLETE.

API calls are counted as `bench.e2e` counts them (`ApiCallCounter`: a botocore `before-call`
handler every session gets, attributed by thread and credentials), with three changes (see
`FolderCallCounter`): the upload threads are the benchmark's; the sandbox's IAM checks made on a
handler's thread are the sandbox's; a call on a thread a handler started is that handler's. CPU by
thread as `bench.e2e` measures it (`ThreadCpuMeter`). A sampler thread reads, once a second, the
slots the semaphore holds, the event bus's deliveries in flight and the main queue's messages.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import statistics
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path
from typing import Any

from bench.e2e import ApiCallCounter, ThreadCpuMeter
from pipeline.status import FailedFileKind

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = PROJECT_ROOT / "docs" / "PERFORMANCE.md"
SECTION = "large-folder"
HEADING = "## Large folder: 10, 100 and 2,000 files in one folder"
DEFAULT_SIZES = (10, 100, 2_000)
UPLOAD_THREADS = 4  # as tests/e2e/test_large_folder.py
UPLOAD_THREAD_PREFIX = "bench-upload"
SAMPLER_THREAD = "bench-sampler"
SAMPLE_INTERVAL_S = 1.0
SPREAD_SECTION = "folder-over-time"
SPREAD_HEADING = "## A folder uploaded over time: runs routed while their files still arrive"


# --------------------------------------------------------------------------- counting


class FolderCallCounter(ApiCallCounter):
    """`bench.e2e`'s counter, attributing three kinds of call differently.

    - The upload threads' calls are the driver's.
    - A call through one of the sandbox's own clients (user agent marked with
      `sandbox.clients.INTERNAL_USER_AGENT`) made on a handler's thread is the sandbox's: the IAM
      enforcement's HeadObject before each handler GetObject (to find the object's KMS key), its
      cached DescribeTable and GetBucketEncryption. `bench.e2e` counts those as the handler's.
    - A call on a thread a handler started (pipeline/tasks.py reads results on a
      ThreadPoolExecutor; the sandbox gives such threads the handler's `running_function()`) is
      that handler's. `bench.e2e` counts those as sandbox machinery ("other").
    """

    def __init__(self) -> None:
        super().__init__()
        self._call = threading.local()
        self.handler_pool_calls = 0  # moved from "sandbox other" to the handler that started the thread
        self.internal_on_handler_threads = 0  # moved from the handler to the sandbox

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self.handler_pool_calls = 0
            self.internal_on_handler_threads = 0

    def _before_call(
        self, model: Any = None, request_signer: Any = None, params: Any = None, **kwargs: Any
    ) -> None:
        from sandbox.clients import INTERNAL_USER_AGENT

        try:
            agent = str(((params or {}).get("headers") or {}).get("User-Agent", ""))
        except AttributeError:
            agent = ""
        self._call.internal = INTERNAL_USER_AGENT in agent
        super()._before_call(model=model, request_signer=request_signer, params=params, **kwargs)

    def _attribute(self, model: Any, request_signer: Any) -> tuple[str, str]:
        from sandbox.runtime import running_function

        thread = threading.current_thread().name
        if thread.startswith(UPLOAD_THREAD_PREFIX):
            return "driver", "benchmark uploads"
        if thread == SAMPLER_THREAD:
            return "driver", "benchmark sampler"
        internal = getattr(self._call, "internal", False)
        service = model.service_model.service_name
        if (
            internal
            and service not in ("logs", "cloudwatch")
            and (thread.startswith("lambda:") or running_function())
        ):
            with self._lock:
                self.internal_on_handler_threads += 1
            return "sandbox", "IAM enforcement (on handler threads)"
        origin, component = super()._attribute(model, request_signer)
        if origin == "sandbox" and component.startswith("other"):
            running = running_function()
            if running is not None:
                with self._lock:  # not held while attributing (bench.e2e's _before_call)
                    self.handler_pool_calls += 1
                return "handler", self._function_names.get(running.function_name, running.function_name)
        return origin, component


# --------------------------------------------------------------------------- one size


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    from pipeline.jobs import parse_timestamp

    return parse_timestamp(stamp).timestamp()


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


class Sampler:
    """Once a second, on its own thread: slots held, event-bus deliveries in flight, main-queue messages.

    Two API calls a sample (the semaphore's GetItem, the queue's GetQueueAttributes), counted as
    the driver's; the bus is read from its `stats`.
    """

    def __init__(self, sb: Any, t0: float, interval: float = SAMPLE_INTERVAL_S) -> None:
        from tests.e2e.test_pipeline_e2e import queue_messages, semaphore

        self._sb, self._t0, self._interval = sb, t0, interval
        self._semaphore = semaphore(sb)
        self._queue_messages = queue_messages
        self._stop = threading.Event()
        self.samples: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._run, name=SAMPLER_THREAD, daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        self._thread.join(10)
        return self.samples

    def _run(self) -> None:
        while not self._stop.is_set():
            sample: dict[str, Any] = {"t": round(time.time() - self._t0, 2)}
            try:
                sample["slots_held"] = self._semaphore.read().active_count
                sample["bus_in_flight"] = int(self._sb.bus.stats["in_flight"])
                sample["main_queue"] = self._queue_messages(self._sb, "MainQueueUrl")
            except Exception as exc:  # never break the run because of the benchmark
                sample["error"] = type(exc).__name__
            self.samples.append(sample)
            self._stop.wait(self._interval)


def run_size(
    files: int,
    counter: FolderCallCounter,
    meter: ThreadCpuMeter,
    *,
    warmup: bool,
    upload_threads: int,
    timeout: float,
    spread_s: float = 0.0,
) -> dict[str, Any]:
    """One size: a fresh sandbox, the warm-up, the timed uploads to idle, then the tracking table."""
    import logging

    from bench.e2e import WARMUP_KEY, _load
    from sandbox.sandbox import Sandbox
    from tests.e2e.test_large_folder import FOLDER, PARAMETERS, body

    items = [(f"{FOLDER}doc-{index:05d}.txt", body(index).encode()) for index in range(files)]
    result: dict[str, Any] = {"files": files, "load_before": _load(), "parameters": dict(PARAMETERS)}
    if spread_s:
        result["spread_s"] = spread_s
    started = time.perf_counter()
    sb = Sandbox(parameters=PARAMETERS).start()
    try:
        result["startup_s"] = round(time.perf_counter() - started, 2)
        logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)  # as bench.e2e
        from pipeline.handlers import _wiring

        _wiring.reset()
        outputs = sb.outputs
        names = {outputs[k]: k.removesuffix("Name") for k in outputs if k.endswith("FunctionName")}
        counter.name_functions(names)
        result["time_scale"] = sb.time_scale.factor
        if warmup:
            warm = time.perf_counter()
            sb.client("s3").put_object(Bucket=outputs["InputBucketName"], Key=WARMUP_KEY, Body=body(10).encode())
            result["warmup_idle"] = sb.wait_until_idle(60)
            result["warmup_s"] = round(time.perf_counter() - warm, 2)
        assert sb.runtime is not None  # a started sandbox has its Lambda runtime
        sb.runtime.clear_invocations()
        t0 = time.time()
        result |= _timed_uploads(sb, items, counter, meter, names, upload_threads, timeout, spread_s, t0)
        result |= _what_happened(sb, items, names, t0)
        result["ok"] = bool(result["idle"]) and result["ok"]
        result["files_per_s"] = files / result["wall_s"]
    finally:
        counter.enabled = False
        sb.stop()
        from pipeline.handlers import _wiring

        _wiring.reset()
    return result


def _timed_uploads(
    sb: Any,
    items: Sequence[tuple[str, bytes]],
    counter: FolderCallCounter,
    meter: ThreadCpuMeter,
    names: Mapping[str, str],
    upload_threads: int,
    timeout: float,
    spread_s: float,
    t0: float,
) -> dict[str, Any]:
    """Upload every file (at once, or spread over `spread_s`) by `upload_threads`, wait for idle;
    the calls, CPU and samples of that window."""
    from bench.e2e import _cpu_seconds, _load

    s3, bucket = sb.client("s3"), sb.outputs["InputBucketName"]
    counter.reset()
    counter.enabled = True
    meter.start()
    cpu_started = _cpu_seconds()
    t0_perf = time.perf_counter()
    sampler = Sampler(sb, t0).start()
    offsets = upload_offsets(len(items), spread_s)

    def put(index: int) -> None:
        wait = t0_perf + offsets[index] - time.perf_counter()
        if wait > 0:
            time.sleep(wait)  # the benchmark's pacing, not the pipeline's
        key, data = items[index]
        s3.put_object(Bucket=bucket, Key=key, Body=data)

    try:
        with ThreadPoolExecutor(max_workers=upload_threads, thread_name_prefix=UPLOAD_THREAD_PREFIX) as pool:
            list(pool.map(put, range(len(items))))
        window: dict[str, Any] = {"upload_s": time.perf_counter() - t0_perf}
        window["idle"] = sb.wait_until_idle(timeout)
        window["wall_s"] = time.perf_counter() - t0_perf
    finally:
        window_samples = sampler.stop()
    window["samples"] = window_samples
    window["cpu_s"] = _cpu_seconds() - cpu_started
    window["cpu_by_thread"] = meter.stop(names)
    counter.enabled = False
    window["calls"], window["calls_direct_total"] = counter.snapshot()
    window["handler_pool_calls"] = counter.handler_pool_calls
    window["internal_on_handler_threads"] = counter.internal_on_handler_threads
    window["load_after"] = _load()
    window["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return window


def _timeline(runs: Sequence[Any], executions: Mapping[str, Mapping[str, Any]], t0: float) -> list[dict[str, Any]]:
    """Each run, in the order they started: its files, when it was created, executed and ended."""
    from pipeline.status import TERMINAL_STATUSES

    timeline = []
    for run in sorted(runs, key=lambda r: r.started_at):
        execution = executions.get(run.execution_arn or "", {})
        start, stop = execution.get("startDate"), execution.get("stopDate")
        terminal = run.status in TERMINAL_STATUSES
        timeline.append(
            {
                "files": len(run.files),
                "status": str(run.status),
                "created_s": _rel(_epoch(run.started_at), t0),
                "execution_start_s": _rel(start.timestamp() if start else None, t0),
                "execution_stop_s": _rel(stop.timestamp() if stop else None, t0),
                "terminal_s": _rel(_epoch(run.updated_at), t0) if terminal else None,
                "execution_status": execution.get("status"),
            }
        )
    return timeline


def _file_accounting(runs: Sequence[Any], uploaded: set[str]) -> dict[str, Any]:
    """Every file in exactly one run, and how the runs ended (as tests/e2e/test_large_folder.py checks)."""
    from pipeline.status import TERMINAL_STATUSES

    owners: Counter[str] = Counter(key for run in runs for key in run.files)
    return {
        "runs": len(runs),
        "run_statuses": dict(Counter(str(r.status) for r in runs)),
        "max_files_per_run": max((len(r.files) for r in runs), default=0),
        "files_in_runs": len(owners),
        "files_terminal": sum(len(r.files) for r in runs if r.status in TERMINAL_STATUSES),
        "files_missing": len(uploaded - set(owners)),
        "files_in_two_runs": sum(1 for n in owners.values() if n > 1),
        "files_empty": sum(len(r.failed_files.get(FailedFileKind.EMPTY, [])) for r in runs),
        "files_failed": sum(
            len(r.failed_files.get(k, [])) for r in runs for k in FailedFileKind if k is not FailedFileKind.EMPTY
        ),
    }


def _what_happened(sb: Any, items: Sequence[tuple[str, bytes]], names: Mapping[str, str], t0: float) -> dict[str, Any]:
    """The tracking table, executions and invocations after the window (untimed)."""
    from bench.e2e import _WARMUP_EXECUTION_PREFIX, WARMUP_KEY, _function_settings, _function_stats
    from pipeline.status import JobStatus
    from tests.e2e.test_pipeline_e2e import all_runs, json_lines

    invocations = sb.runtime.invocations
    pages = sb.client("stepfunctions").get_paginator("list_executions").paginate(stateMachineArn=sb.outputs["StateMachineArn"])
    executions = {
        e["executionArn"]: e for page in pages for e in page["executions"] if not e["name"].startswith(_WARMUP_EXECUTION_PREFIX)
    }
    runs = [r for r in all_runs(sb) if r.job_id != WARMUP_KEY]
    timeline = _timeline(runs, executions, t0)

    def of(function: str) -> list[Any]:
        return sorted((r for r in invocations if names.get(r.function_name) == function), key=lambda r: r.started_at)

    ingest, tenth = of("IngestFunction"), max(1, len(of("IngestFunction")) // 10)
    router_lines = json_lines(line for r in of("RouterFunction") for line in r.log_lines)
    found = _file_accounting(runs, {key for key, _ in items}) | {
        "executions": len(executions),
        "execution_statuses": dict(Counter(e["status"] for e in executions.values())),
        "timeline": timeline,
        "tracker_invocations": [
            [_rel(r.started_at, t0), _rel(r.started_at + r.duration_ms / 1000, t0)] for r in of("WorkflowTrackerFunction")
        ],
        "functions": _function_stats(invocations, names),
        "ingest_done_s": _rel(max((r.started_at + r.duration_ms / 1000 for r in ingest), default=None), t0),
        "ingest_first_tenth_ms": _median([r.duration_ms for r in ingest[:tenth]]),
        "ingest_last_tenth_ms": _median([r.duration_ms for r in ingest[-tenth:]]),
        "bus_workers": getattr(sb.bus, "_n_workers", None),
        "settings": _function_settings(sb),
        **router_records(router_lines),
    }
    last = [t["terminal_s"] for t in timeline if t["terminal_s"] is not None]
    found["last_terminal_s"] = max(last) if last else None
    found["ok"] = (  # and idle: run_size
        found["files_missing"] == 0
        and found["files_in_two_runs"] == 0
        and bool(runs)
        and all(r.status == JobStatus.COMPLETE for r in runs)
    )
    return found


def _rel(value: float | None, t0: float) -> float | None:
    return None if value is None else round(value - t0, 3)


def upload_offsets(files: int, spread_s: float) -> list[float]:
    """When each file is uploaded, in seconds after the first: evenly over `spread_s` (0: at once). Pure."""
    if files <= 1 or spread_s <= 0:
        return [0.0] * files
    step = spread_s / (files - 1)
    return [round(index * step, 3) for index in range(files)]


def router_records(lines: Any) -> dict[str, dict[str, int]]:
    """What the Router did with each SQS record, from its log lines: {"router_outcomes": {outcome:
    n}, "router_failures": {reason: n}}. A failed record comes back only after the main queue's
    visibility timeout; a re-sent one ("resent", "waiting") after its short delay. Pure."""
    outcomes: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    for doc in lines:
        if doc.get("message") == "message routed" and doc.get("outcome"):
            outcomes[str(doc["outcome"])] += 1
        elif str(doc.get("message", "")).startswith("job message not routed"):
            failures[str(doc.get("reason", "unknown"))] += 1
    return {"router_outcomes": dict(outcomes), "router_failures": dict(failures)}


# --------------------------------------------------------------------------- the section (pure)


def _n(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    marks = {"l": "---", "r": "---:"}
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(marks[a] for a in align) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def calls_by(size: Mapping[str, Any], origin: str) -> dict[tuple[str, str, str], int]:
    """{(component, service, operation): calls} of one origin in one size's timed window."""
    totals: dict[tuple[str, str, str], int] = defaultdict(int)
    for row in size.get("calls", []):
        if row["origin"] == origin:
            totals[(row["component"], row["service"], row["operation"])] += int(row["calls"])
    return dict(totals)


def per_file(size: Mapping[str, Any], origin: str) -> float | None:
    files = size.get("files") or 0
    return sum(calls_by(size, origin).values()) / files if files else None


def _component_per_file(size: Mapping[str, Any], origin: str, component: str) -> float:
    files = size.get("files") or 1
    return sum(n for (c, _, _), n in calls_by(size, origin).items() if c == component) / files


def _runs_cell(size: Mapping[str, Any]) -> str:
    timeline = size.get("timeline", [])
    counts = [t["files"] for t in timeline]
    text = f"{size.get('runs', len(timeline))}"
    if counts:
        low, high = min(counts), max(counts)
        text += f" ({low} files)" if low == high else f" ({low}-{high} files)"
    return text


def _ok_cell(size: Mapping[str, Any]) -> str:
    if size.get("ok"):
        return "yes"
    problems = []
    if not size.get("idle", True):
        problems.append("not idle")
    if size.get("files_missing"):
        problems.append(f"{size['files_missing']} files in no run")
    if size.get("files_in_two_runs"):
        problems.append(f"{size['files_in_two_runs']} in two runs")
    bad = {k: v for k, v in size.get("run_statuses", {}).items() if k != "COMPLETE"}
    problems += [f"{v} {k}" for k, v in sorted(bad.items())]
    return "**no**: " + ", ".join(problems or ["see the JSON"])


def headline_rows(sizes: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for size in sizes:
        wall, last = size.get("wall_s"), size.get("last_terminal_s")
        files = size.get("files", 0)
        cpu = size.get("cpu_s")
        handler, sfn = per_file(size, "handler"), per_file(size, "stepfunctions")
        both = handler + sfn if handler is not None and sfn is not None else None
        rows.append(
            [
                f"{files:,}",
                _runs_cell(size),
                _n(size.get("upload_s")),
                _n(last),
                _n(wall),
                f"**{_n(files / wall if wall else None)}**",
                _n(files / last if last else None),
                f"**{_n(handler)}**",
                _n(sfn),
                _n(both),
                _n(per_file(size, "sandbox")),
                f"{_n(cpu)} ({cpu / wall:.2f}x)" if cpu and wall else "-",
                _ok_cell(size),
            ]
        )
    return rows


def _components(sizes: Sequence[Mapping[str, Any]], origin: str) -> list[str]:
    seen: dict[str, float] = defaultdict(float)
    for size in sizes:
        for (component, _, _), n in calls_by(size, origin).items():
            seen[component] += n / (size.get("files") or 1)
    return sorted(seen, key=lambda c: (-seen[c], c))


def breakdown_rows(sizes: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Calls per file by who made them: each handler, the state machine's Task states, the sandbox."""
    rows = []
    labels = {"handler": "handler", "stepfunctions": "state machine", "sandbox": "sandbox"}
    for origin in ("handler", "stepfunctions", "sandbox"):
        for component in _components(sizes, origin):
            ops: dict[str, float] = defaultdict(float)
            for size in sizes:
                for (c, service, op), n in calls_by(size, origin).items():
                    if c == component:
                        ops[f"{service} {op}"] += n / (size.get("files") or 1)
            top = sorted(ops, key=lambda k: (-ops[k], k))[:4]
            biggest = sizes[-1]
            here = {
                f"{s} {o}": n / (biggest.get("files") or 1)
                for (c, s, o), n in calls_by(biggest, origin).items()
                if c == component
            }
            rows.append(
                [
                    f"{labels[origin]}: {component}",
                    *(_n(_component_per_file(size, origin, component)) for size in sizes),
                    ", ".join(f"{op} {_n(here[op])}" if op in here else op for op in top),
                ]
            )
    return rows


def _thread_group(kind: str) -> str:
    if kind.startswith("Step Functions"):
        return "Step Functions interpreter (moto)"
    if kind.startswith("handler") or kind == "other: ThreadPoolExecutor":
        return "handler threads (+ the pools they start)"
    if kind.startswith(("SQS poller", "event bus")):
        return "poller + event bus (invokes, logs, metrics)"
    if kind.startswith(("benchmark", "other: bench-")):
        return "benchmark (uploads, sampler, wait_until_idle)"
    return "other sandbox threads"


def cpu_groups(size: Mapping[str, Any]) -> dict[str, float]:
    groups: dict[str, float] = defaultdict(float)
    for kind, seconds in size.get("cpu_by_thread", {}).items():
        groups[_thread_group(kind)] += seconds
    return dict(groups)


def cpu_rows(sizes: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    order = [
        "Step Functions interpreter (moto)",
        "handler threads (+ the pools they start)",
        "poller + event bus (invokes, logs, metrics)",
        "benchmark (uploads, sampler, wait_until_idle)",
        "other sandbox threads",
    ]
    grouped = [cpu_groups(s) for s in sizes]
    rows = []
    for group in order:
        if not any(g.get(group) for g in grouped):
            continue
        cells = []
        for g in grouped:
            total = sum(g.values())
            cells.append(f"{g.get(group, 0.0):,.1f} ({g.get(group, 0.0) / total:.0%})" if total else "-")
        rows.append([group, *cells])
    return rows


def function_rows(sizes: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    names = sorted({n for s in sizes for n in s.get("functions", {})})
    rows = []
    for name in names:
        cells = []
        for size in sizes:
            f = size.get("functions", {}).get(name)
            cells.append(
                f"{f['invocations']:,} · {_n(f['median_ms'], 0)} ms · {_n(f['total_s'], 1)} s" if f else "-"
            )
        rows.append([name, *cells])
    return rows


def _busy(timeline: Sequence[Mapping[str, Any]]) -> list[tuple[float, float]]:
    """The merged intervals in which at least one execution ran."""
    spans = sorted(
        (t["execution_start_s"], t["execution_stop_s"])
        for t in timeline
        if t.get("execution_start_s") is not None and t.get("execution_stop_s") is not None
    )
    merged: list[tuple[float, float]] = []
    for start, stop in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged


def stall(size: Mapping[str, Any], minimum_s: float = 10.0) -> dict[str, Any] | None:
    """The longest time no execution ran while a run waited for one (at least `minimum_s`), with
    what the samples and the tracker's invocations show about it; None if there was none."""
    timeline = size.get("timeline", [])
    busy = _busy(timeline)
    gaps = [(a[1], b[0]) for a, b in pairwise(busy)]
    waiting_in = [
        (
            start,
            stop,
            sum(1 for t in timeline if t["created_s"] < stop and t.get("execution_start_s", 0) >= stop),
        )
        for start, stop in gaps
    ]
    waiting_in = [g for g in waiting_in if g[2] and g[1] - g[0] >= minimum_s]
    if not waiting_in:
        return None
    start, stop, waiting = max(waiting_in, key=lambda g: g[1] - g[0])
    inside = [s for s in size.get("samples", []) if start + 1 < s["t"] < stop - 1 and "error" not in s]
    releases = [
        end for begin, end in size.get("tracker_invocations", []) if begin is not None and begin >= start
    ]
    return {
        "start_s": start,
        "stop_s": stop,
        "waiting_runs": waiting,
        "slots_held": sorted({s["slots_held"] for s in inside}),
        "bus_in_flight_max": max((s["bus_in_flight"] for s in inside), default=None),
        "first_release_s": min(releases) if releases else None,
    }


def _throughput_figures(sizes: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    small = sizes[0]
    rows = [("files/s on the wall time", ", ".join(f"{_n(s['files'] / s['wall_s'])} at {s['files']:,}" for s in sizes))]
    first = [t["execution_start_s"] for t in small.get("timeline", []) if t.get("execution_start_s") is not None]
    if first:
        rows.append((f"at {small['files']:,} files: first execution start after the first upload", f"{_n(min(first))} s"))
    return rows


def _stall_figures(big: Mapping[str, Any]) -> list[tuple[str, str]]:
    found = stall(big)
    if not found:
        return []
    held = found["slots_held"]
    slots = (big.get("parameters") or {}).get("MaxConcurrentWorkflows")
    release = found["first_release_s"]
    rows = [
        (
            f"at {big['files']:,} files: no execution ran while runs waited (runs waiting)",
            f"{_n(found['start_s'])}-{_n(found['stop_s'])} s, {_n(found['stop_s'] - found['start_s'])} s ({found['waiting_runs']})",
        )
    ]
    if held:
        rows.append(("slots held in that stall (sampled every second)", f"{held[0] if len(held) == 1 else f'{held[0]}-{held[-1]}'} of {slots or '?'}"))
    if release is not None:
        rows.append(("the WorkflowTracker's first invocation after the stall began", f"{_n(release)} s"))
    if found["bus_in_flight_max"]:
        rows.append(("event-bus deliveries in flight in the stall, at most", f"{found['bus_in_flight_max']:,} ({big.get('bus_workers') or '?'} workers)"))
    return rows


def _cpu_figures(results: Mapping[str, Any], sizes: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    big = sizes[-1]
    ratios = [s["cpu_s"] / s["wall_s"] for s in sizes if s.get("cpu_s")]
    groups = cpu_groups(big)
    total = sum(groups.values())
    if not ratios or not total:
        return []
    meta = results.get("meta", {})
    rows = [("process CPU / wall time", f"{min(ratios):.2f}-{max(ratios):.2f}x on {meta.get('usable_cores', '?')} usable cores")]
    sfn = groups.get("Step Functions interpreter (moto)", 0.0) / total
    handlers = groups.get("handler threads (+ the pools they start)", 0.0) / total
    rows.append(
        (
            f"at {big['files']:,} files: CPU a file (interpreter threads / handler threads)",
            f"{big['cpu_s'] / big['files'] * 1000:,.0f} ms ({sfn:.0%} / {handlers:.0%})",
        )
    )
    ingest_cpu = big.get("cpu_by_thread", {}).get("handler: IngestFunction")
    if ingest_cpu:
        rows.append(("Ingest's share of the CPU (a file)", f"{ingest_cpu / total:.0%} ({ingest_cpu / big['files'] * 1000:,.0f} ms)"))
    return rows


def _ingest_figures(big: Mapping[str, Any]) -> list[tuple[str, str]]:
    ingest = big.get("functions", {}).get("IngestFunction")
    if not ingest or big.get("ingest_done_s") is None or not big.get("upload_s"):
        return []
    rows = [
        (f"at {big['files']:,} files: uploads done / last Ingest ended", f"{_n(big['upload_s'])} s / {_n(big['ingest_done_s'])} s"),
        ("Ingest invocations (median wall ms)", f"{ingest['invocations']:,} ({_n(ingest['median_ms'], 0)} ms)"),
    ]
    first_ms, last_ms = big.get("ingest_first_tenth_ms"), big.get("ingest_last_tenth_ms")
    if first_ms and last_ms:
        rows.append(("Ingest median ms, first tenth / last tenth", f"{_n(first_ms, 0)} / {_n(last_ms, 0)}"))
    return rows


def _execution_figures(big: Mapping[str, Any]) -> list[tuple[str, str]]:
    timeline = big.get("timeline", [])
    durations = [
        t["execution_stop_s"] - t["execution_start_s"]
        for t in timeline
        if t.get("execution_stop_s") is not None and t.get("execution_start_s") is not None
    ]
    if len(durations) <= 1:
        return []
    counts = [t["files"] for t in timeline]
    ran = sum(b - a for a, b in _busy(timeline))
    return [
        (f"at {big['files']:,} files: runs (files each)", f"{len(durations)} ({min(counts)}-{max(counts)})"),
        ("execution seconds, median (max)", f"{_n(statistics.median(durations))} ({_n(max(durations))})"),
        ("seconds some execution was running, of the wall time", f"{_n(ran, 0)} of {_n(big['wall_s'], 0)}"),
    ]


def _call_figures(sizes: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    big = sizes[-1]
    rows = []
    for origin, label in (("handler", "by handlers"), ("stepfunctions", "by the state machine"), ("sandbox", "by the sandbox")):
        values = [v for s in sizes if (v := per_file(s, origin)) is not None]
        if values:
            rows.append((f"calls a file {label}, over the sizes", f"{_n(min(values))}-{_n(max(values))}"))
    resent = calls_by(big, "handler").get(("RouterFunction", "sqs", "SendMessage"), 0)
    rows.append((f"at {big['files']:,} files: Router capacity re-sends (SendMessage)", f"{resent:,}"))
    rows.append(("handler calls on threads a handler started, over the sizes", f"{sum(s.get('handler_pool_calls', 0) for s in sizes):,}"))
    rows.append(
        ("the sandbox's IAM calls on handler threads, over the sizes", f"{sum(s.get('internal_on_handler_threads', 0) for s in sizes):,}")
    )
    rss = [(s["files"], s["max_rss_mb"]) for s in sizes if s.get("max_rss_mb")]
    if rss:
        rows.append(("peak resident size after each size (cumulative)", ", ".join(f"{mb / 1024:,.1f} GB after {f:,}" for f, mb in rss)))
    return rows


def figures(results: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(figure, value) for every figure the hand-written analysis reads; a figure without data is left out. Pure."""
    sizes = [s for s in results.get("sizes", []) if s.get("wall_s")]
    if not sizes:
        return []
    big = sizes[-1]
    return (
        _throughput_figures(sizes)
        + _stall_figures(big)
        + _cpu_figures(results, sizes)
        + _ingest_figures(big)
        + _execution_figures(big)
        + _call_figures(sizes)
    )


def _stamp(meta: Mapping[str, Any], sizes: Sequence[Mapping[str, Any]]) -> list[str]:
    load, load_end = meta.get("load_start"), meta.get("load_end")
    params: Mapping[str, Any] = next((s["parameters"] for s in sizes if s.get("parameters")), {}) or {}
    scale = next((s.get("time_scale") for s in sizes if s.get("time_scale")), None)
    rows = [
        ("measured", f"{meta.get('date', '?')} with `{meta.get('command', 'python -m bench.large_folder')}` ({_n(meta.get('duration_s'), 0)} s in all)"),
        ("cores", f"{meta.get('usable_cores', '?')} usable of {meta.get('cores', '?')} ({meta.get('cpu_model') or 'unknown CPU'})"),
        ("load average, start / end", f"{load[0] if load else '?'} / {load_end[0] if load_end else '?'}"),
        ("Python, OS, moto, botocore", f"{meta.get('python', '?')}, {meta.get('platform', '?')}, {meta.get('moto', '?')}, {meta.get('botocore', '?')}"),
        ("stack parameters", ", ".join(f"{k} {v}" for k, v in params.items()) or "defaults"),
        ("time scale; upload threads", f"{f'{scale:g}' if scale else '?'}; {meta.get('upload_threads', UPLOAD_THREADS)}"),
    ]
    return [*_table(("", ""), rows, "ll"), ""]


def render_section(results: Mapping[str, Any]) -> str:
    """The `large-folder` section of docs/PERFORMANCE.md (without its markers): tables only. Pure."""
    sizes = results.get("sizes", [])
    headline = (
        "files", "runs (files each)", "upload s", "last terminal s", "wall s", "files/s", "files/s to last terminal",
        "handler calls/file", "state machine calls/file", "handler + state machine/file", "sandbox calls/file",
        "CPU s (CPU/wall)", "ok",
    )
    lines = [HEADING, "", *_stamp(results.get("meta", {}), sizes), *_table(headline, headline_rows(sizes), "rrrrrrrrrrrrl"), ""]
    mismatch = [
        s["files"]
        for s in sizes
        if s.get("calls_direct_total") is not None and s["calls_direct_total"] != sum(r["calls"] for r in s.get("calls", []))
    ]
    if mismatch:
        at = ", ".join(f"{f:,}" for f in mismatch)
        lines += [f"The `_make_api_call` cross-check disagreed with the event hook at {at} files: some calls were not seen by the hook.", ""]
    header = [f"{s['files']:,} files" for s in sizes]
    operations = f"most frequent operations (per file at {sizes[-1]['files']:,} files)" if sizes else "operations"
    lines += [
        "### API calls per file, by who made them",
        "",
        *_table(("made by", *header, operations), breakdown_rows(sizes), "l" + "r" * len(sizes) + "l"),
        "",
        "### Where the CPU went (CPU seconds in the timed window, share)",
        "",
        *_table(("threads", *header), cpu_rows(sizes), "l" + "r" * len(sizes)),
        "",
        "### Lambda invocations (count · median · total)",
        "",
        *_table(("function", *header), function_rows(sizes), "l" + "r" * len(sizes)),
        "",
    ]
    rows = figures(results)
    if rows:
        lines += ["### Figures the analysis reads", "", *_table(("figure", "this run"), rows, "lr"), ""]
    return "\n".join(lines).rstrip() + "\n"


def spread_rows(sizes: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for size in sizes:
        outcomes = size.get("router_outcomes") or {}
        failed = size.get("router_failures") or {}
        upload, last = size.get("upload_s"), size.get("last_terminal_s")
        gap = stall(size, minimum_s=0.0)
        rows.append(
            [
                f"{size.get('files', 0):,}",
                _n(size.get("spread_s")),
                _runs_cell(size),
                f"{outcomes.get('started', 0):,} · **{outcomes.get('resent', 0):,}** · {outcomes.get('waiting', 0):,}",
                f"**{sum(failed.values()):,}**"
                + (" (" + ", ".join(f"{k} {v}" for k, v in sorted(failed.items())) + ")" if failed else ""),
                _n(last - upload if last is not None and upload is not None else None),
                _n(gap["stop_s"] - gap["start_s"]) if gap else "0",
                _n(size.get("wall_s")),
                _ok_cell(size),
            ]
        )
    return rows


def render_spread_section(results: Mapping[str, Any]) -> str:
    """The `folder-over-time` section of docs/PERFORMANCE.md (without its markers): tables only. Pure."""
    sizes = results.get("sizes", [])
    settings: Mapping[str, Any] = next((s.get("settings") for s in sizes if s.get("settings")), {}) or {}
    retry, settle = settings.get("capacity_retry_seconds"), settings.get("folder_settle_seconds")
    waits = [("FolderSettleSeconds / capacity re-send delay, scaled", f"{_n(settle, 0)} s / {_n(max(1, retry), 0) if retry is not None else '-'} s")]
    head = (
        "files", "uploaded over s", "runs (files each)", "routed: started · re-sent · capacity waits", "records failed",
        "last upload → last terminal s", "longest wait s", "wall s", "ok",
    )
    lines = [
        SPREAD_HEADING,
        "",
        *_stamp(results.get("meta", {}), sizes)[:-1],
        *[f"| {name} | {value} |" for name, value in waits],
        "",
        *_table(head, spread_rows(sizes), "rrrlrrrrl"),
        "",
    ]
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------- entry point


def _progress(message: str) -> None:
    print(f"[bench.large_folder {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.large_folder", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, DEFAULT_SIZES)),
        help="files in the folder, ascending (default 10,100,2000)",
    )
    parser.add_argument(
        "--upload-threads",
        type=int,
        default=UPLOAD_THREADS,
        help="uploading threads (default 4, as the e2e test)",
    )
    parser.add_argument("--no-warmup", action="store_true", help="upload into cold functions")
    parser.add_argument(
        "--spread",
        default="",
        metavar="SECONDS[,SECONDS...]",
        help="upload each folder's files evenly over this long, one row per value (writes the folder-over-time section)",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="report path (default docs/PERFORMANCE.md)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results as JSON")
    parser.add_argument(
        "--render", type=Path, default=None, metavar="JSON", help="only re-render a saved --json file"
    )
    return parser.parse_args(argv)


def _spreads(text: str) -> list[float]:
    try:
        spreads = [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise SystemExit("--spread: seconds, e.g. 60 or 60,15") from None
    if any(s <= 0 for s in spreads):
        raise SystemExit("--spread: positive seconds, e.g. 60 or 60,15")
    return spreads


def _sizes(text: str) -> list[int]:
    sizes = [int(s.replace("_", "")) for s in text.split(",") if s.strip()]
    if not sizes or sizes != sorted(set(sizes)) or sizes[0] < 1:
        raise SystemExit("--sizes: ascending, distinct, positive numbers")
    return sizes


def write_section(path: Path, results: Mapping[str, Any]) -> None:
    """The results' own section: `folder-over-time` for a spread upload, else `large-folder`."""
    from bench.sections import replace_section

    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.exists() else ""
    if results.get("meta", {}).get("spread_s"):
        path.write_text(replace_section(old, SPREAD_SECTION, render_spread_section(results)))
    else:
        path.write_text(replace_section(old, SECTION, render_section(results)))


def idle_timeout(files: int, spread_s: float = 0.0) -> float:
    """As the e2e test allows 1,500 s for 2,000 files; never under 120 s; plus the upload's spread."""
    return max(120.0, 0.75 * files) + spread_s


def main(argv: Sequence[str] | None = None) -> int:
    counter = FolderCallCounter().install()  # first: before any botocore session exists
    meter = ThreadCpuMeter().install()
    args = parse_args(argv)
    if args.render:
        write_section(args.out, json.loads(args.render.read_text()))
        _progress(f"rendered {args.render} into {args.out}")
        return 0
    sizes = _sizes(args.sizes)
    spreads = _spreads(args.spread)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(name, value)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "1")  # as tests/conftest.py: set once, never swapped
    if str(PROJECT_ROOT) not in sys.path:
        sys.path.insert(0, str(PROJECT_ROOT))  # tests.e2e.*, whose drivers this reuses

    from bench.e2e import _load, machine_facts, measuring_args

    words = sys.argv[1:] if argv is None else list(argv)
    began = time.perf_counter()
    results: dict[str, Any] = {
        "meta": {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "command": " ".join(["python -m bench.large_folder", *measuring_args(words)]),
            "sizes": sizes,
            "upload_threads": args.upload_threads,
            "warmup": not args.no_warmup,
            "spread_s": spreads,
            "load_start": _load(),
            **machine_facts(),
        },
        "sizes": [],
    }
    try:
        for files, spread in [(f, s) for f in sizes for s in spreads or [0.0]]:
            _progress(f"{files:,} files" + (f" over {spread:g} s" if spread else "") + ": starting a sandbox")
            size = run_size(
                files,
                counter,
                meter,
                warmup=not args.no_warmup,
                upload_threads=args.upload_threads,
                timeout=idle_timeout(files, spread),
                spread_s=spread,
            )
            _progress(
                f"{files:,} files: {size['runs']} runs, wall {size['wall_s']:.1f}s, {size['files_per_s']:.2f} files/s, "
                f"handler calls/file {per_file(size, 'handler'):.2f}, ok={size['ok']}, load={size['load_after']}"
            )
            results["sizes"].append(size)
    finally:
        counter.uninstall()
        meter.uninstall()
    results["meta"]["load_end"] = _load()
    results["meta"]["duration_s"] = round(time.perf_counter() - began, 1)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    write_section(args.out, results)
    section = SPREAD_SECTION if spreads else SECTION
    _progress(f"wrote the {section} section of {args.out} in {results['meta']['duration_s']:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
