"""The sandbox against bare moto, same handler calls, same run: the simulator's own speed, reported.

Not a goal (bench.goals lists it among the reported benches): it says how fast the sandbox runs
the tests and the demo, not how the pipeline behaves on AWS; docs/PERFORMANCE.md shows the number.

    .venv/bin/python -m bench.sandbox_ratio                 # 50 files, 5 repetitions per layout (~5 min)
    .venv/bin/python -m bench.sandbox_ratio --files 100 --repeat 5    # the long version
    .venv/bin/python -m bench.sandbox_ratio --files 20 --repeat 1 --layouts single

Per layout (single-file jobs; folder jobs) and repetition, in one process:
1. Sandbox. A fresh `Sandbox`, one warm-up file processed to idle, then N files uploaded and timed
   until `wait_until_idle` returns. Every AWS call a handler makes (made on a thread that runs a
   handler: `sandbox.runtime.running_function()` is set) is recorded with its service, region,
   operation and parameters (in the order they ended, see 2), warm-up included. sandbox jobs/s = jobs / that
   wall time. It includes everything the sandbox does around the handlers: S3 -> SQS, the SQS
   poller, the Lambda runtime (threads, log capture, CloudWatch writes), IAM enforcement, the ASL
   interpreter with its Wait/Retry waits and Lambda/DynamoDB tasks, the event bus, the status
   watcher, and idle detection.
2. Bare moto. A fresh in-process `mock_aws` (Step Functions *not* executing), the same tables,
   queues, buckets, state machines and SSM parameters created beforehand (copied from the sandbox,
   untimed), the warm-up's recorded calls replayed untimed; then timed: the N uploads and every
   recorded handler call, replayed in order on one thread with one client per service (as the
   handlers create theirs once). Step Functions calls are moto's plain API calls (start_execution
   records an execution; nothing runs). bare jobs/s = jobs / that time.
   The workflow's own writes (the state machine's DynamoDB tasks, e.g. MarkDetecting) are recorded
   too and replayed in their place, untimed (their time is taken off the window): without them a
   handler's conditional write that expects the status they set (the verdict) failed its condition
   on bare moto, which is cheaper than doing the write -- 20 of ~440 calls per run did, making bare
   moto look faster than the same calls are. Calls are kept in the order they ended (concurrent
   writes took effect in that order inside moto's lock) with their outcome in the sandbox, and the
   row names every handler call that ended otherwise on bare moto (none, on the minimal-wait layouts).
3. ratio = sandbox jobs/s / bare jobs/s, the median over repetitions. Each timed window starts
   after a full garbage collection, so neither side collects the other's garbage.

The pipeline's designed waits. `FolderSettleSeconds` (a folder job's message is sent with that SQS
delay, so sibling uploads join the run) and `CapacityRetrySeconds` (a message that found every slot
busy is sent again with that delay) are the pipeline's behaviour, set by template parameters, not
sandbox machinery; bare moto replays the calls back to back and so never waits them. The main rows
(single-file jobs, folders of 5) therefore run the sandbox with both at the lowest value the
template allows (its `MinValue`, 0 s) -- the same setting as the bare side, which has no waits --
and say so. The pipeline then behaves as deployed with those values (e.g. a router that finds the
slots full sends the message again at once; the extra router calls are recorded and replayed on
the bare side too). One more row runs folders with the template's default waits
(30 s each, scaled by the sandbox's time scale 0.05 to 2 s), to show what they cost.

"Where the time goes" comes from one extra, profiled sandbox run: a `cProfile.Profile` per thread
(every thread the sandbox starts), timed with each thread's own CPU clock (`time.thread_time`) so
that threads waiting cost nothing; the per-thread stats are summed over the timed window only
(stats at its end minus stats at its start). Shares are of all CPU spent in the window.

Timings are noisy on a shared machine: medians of several repetitions are reported.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import gc
import logging
import os
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench.goal_row import GoalRow

DESIGNED_WAITS = ("FolderSettleSeconds", "CapacityRetrySeconds")  # pipeline behaviour, not machinery


def minimal_waits() -> dict[str, str]:
    """The designed waits at the lowest value the template allows (its MinValue)."""
    from stack.template import load_template

    declared = load_template()["Parameters"]
    return {name: str(declared[name]["MinValue"]) for name in DESIGNED_WAITS}


_REALTIME = {"ProcessingMode": "realtime"}
_FOLDER_DEPTH = {"single": 0, "folders": 1, "folders-waits": 1}
# layout -> (label, waits at the template minimum?)
LAYOUT_INFO = {
    "single": ("single-file jobs", True),
    "folders": ("folders of 5", True),
    "folders-waits": ("folders of 5 with the template's default designed waits", False),
}


def layout_parameters(layout: str) -> dict[str, str]:
    """Stack parameters of a layout: realtime, its folder depth, and (main rows) minimal waits."""
    parameters = {**_REALTIME, "JobFolderDepth": str(_FOLDER_DEPTH[layout])}
    return parameters | minimal_waits() if LAYOUT_INFO[layout][1] else parameters


def default_waits() -> dict[str, str]:
    """The designed waits a default `Sandbox` deploys: the template's defaults, time-scaled."""
    from sandbox.sandbox import DEFAULT_TIME_SCALE, scaled_parameters

    return {k: v for k, v in scaled_parameters({}, DEFAULT_TIME_SCALE).items() if k in DESIGNED_WAITS}


WARMUP_KEY = "bench-ratio-warmup.txt"


# --------------------------------------------------------------------------- recording handler calls


@dataclass
class RecordedCall:
    service: str
    region: str
    operation: str  # botocore operation name, e.g. "UpdateItem"
    params: Mapping[str, Any]
    # A call the state machine made (a DynamoDB task): replayed untimed, so that each handler call
    # meets the state it met in the sandbox (see the module doc).
    workflow: bool = False
    outcome: str | None = None  # in the sandbox: "ok" or the error code

    @property
    def label(self) -> str:
        return f"{self.service}.{self.operation}"


def outcome_of(exc: BaseException | None) -> str:
    """"ok", or the error a call ended with: its AWS error code when it has one."""
    if exc is None:
        return "ok"
    code = getattr(exc, "response", {}).get("Error", {}).get("Code") if hasattr(exc, "response") else None
    return str(code or type(exc).__name__)


@dataclass
class CallRecorder:
    """Records, in the order made, every API call made on a handler's thread (`running_function()`
    set) and every call of the state machine's own tasks (marked `workflow`), with its outcome."""

    calls: list[RecordedCall] = field(default_factory=list)
    unreplayable: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _original: Any = None

    def install(self) -> CallRecorder:
        from botocore.client import BaseClient

        from sandbox.clients import INTERNAL_USER_AGENT
        from sandbox.iam_enforcement import IamEnforcement
        from sandbox.runtime import running_function

        original = self._original = BaseClient._make_api_call  # type: ignore[attr-defined]  # botocore private
        recorder = self

        def _make_api_call(client: Any, operation_name: str, api_params: Any) -> Any:
            recorded: RecordedCall | None = None
            if INTERNAL_USER_AGENT not in (client.meta.config.user_agent_extra or ""):  # not the sandbox's own
                if running_function() is not None:
                    recorded = recorder._copy(client, operation_name, api_params, workflow=False)
                else:
                    caller = IamEnforcement.caller(sys._getframe(1))
                    if caller is not None and caller.kind == "state_machine":
                        recorded = recorder._copy(client, operation_name, api_params, workflow=True)
            try:
                response = original(client, operation_name, api_params)
            except Exception as exc:
                if recorded is not None:
                    recorder._append(recorded, outcome_of(exc))
                raise
            if recorded is not None:
                recorder._append(recorded, "ok")
            return response

        BaseClient._make_api_call = _make_api_call  # type: ignore[attr-defined]  # botocore private, not in its stubs
        return self

    def uninstall(self) -> None:
        from botocore.client import BaseClient

        if self._original is not None:
            BaseClient._make_api_call = self._original  # type: ignore[attr-defined]
            self._original = None

    def _copy(self, client: Any, operation: str, params: Any, *, workflow: bool) -> RecordedCall | None:
        """The call as it is sent (a deep copy), or None if it cannot be replayed byte for byte."""
        service = client.meta.service_model.service_name
        try:
            copied = copy.deepcopy(dict(params))
        except Exception:  # a streamed body
            with self._lock:
                self.unreplayable[f"{service}.{operation}"] += 1
            return None
        return RecordedCall(service, client.meta.region_name, operation, copied, workflow=workflow)

    def _append(self, call: RecordedCall, outcome: str) -> None:
        """Kept in the order the calls *ended*: concurrent writes (two routers' transactions) took
        effect in that order inside moto's lock, which the order they started in need not be."""
        call.outcome = outcome
        with self._lock:
            self.calls.append(call)


# --------------------------------------------------------------------------- per-thread CPU profile


Stats = dict[tuple[str, int, str], tuple[int, float, float]]  # function -> (calls, own s, cumulative s)


def thread_kind(name: str) -> str:
    """What a thread does, from its name: `lambda:<function>:<id>` runs a handler, and so on."""
    if name.startswith("lambda:"):
        return "handlers (their code and the moto calls they make)"
    if "(_execution_logic)" in name:
        return "ASL interpreter: executions"
    if name.startswith("Thread-") and "(" in name:
        return f"ASL interpreter / moto: {name[name.index('(') + 1:].rstrip(')')} threads"
    for prefix, kind in (
        ("sandbox-sfn-status", "the execution status watcher"),
        ("sandbox-eventbus", "event bus delivery and timer"),
        ("sqs-poller", "the SQS poller"),
        ("sandbox-aws-metrics", "AWS/Lambda and AWS/States metrics"),
        ("sandbox-sqs-metrics", "AWS/SQS metrics"),
        ("sandbox-alarm-engine", "the alarm engine"),
    ):
        if name.startswith(prefix):
            return kind
    return name


class ThreadProfiler:
    """A cProfile per thread started after `install()`, on that thread's CPU clock."""

    def __init__(self) -> None:
        self._profiles: list[tuple[str, cProfile.Profile]] = []
        self._lock = threading.Lock()

    def install(self) -> ThreadProfiler:
        def hook(*_: Any) -> None:
            profile = cProfile.Profile(time.thread_time)
            with self._lock:
                self._profiles.append((thread_kind(threading.current_thread().name), profile))
            profile.enable()  # replaces this hook for the calling thread

        threading.setprofile(hook)
        return self

    def uninstall(self) -> None:
        threading.setprofile(None)

    def snapshot(self) -> dict[str, Stats]:
        """{thread kind: {function: (calls, own CPU s, cumulative CPU s)}}, summed over its threads.

        A cumulative time counts only calls that returned; own times are always complete.
        """
        total: dict[str, Stats] = {}
        with self._lock:
            profiles = list(self._profiles)
        for kind, profile in profiles:
            profile.snapshot_stats()  # reads without disabling (disable() would act on this thread)
            stats = total.setdefault(kind, {})
            for func, (_cc, nc, tt, ct, _callers) in profile.stats.items():
                calls, own, cum = stats.get(func, (0, 0.0, 0.0))
                stats[func] = (calls + nc, own + tt, cum + ct)
        return total


def stats_delta(before: Mapping[str, Stats], after: Mapping[str, Stats]) -> dict[str, Stats]:
    out: dict[str, Stats] = {}
    for kind, stats in after.items():
        earlier = before.get(kind, {})
        out[kind] = {}
        for func, (calls, own, cum) in stats.items():
            b_calls, b_own, b_cum = earlier.get(func, (0, 0.0, 0.0))
            out[kind][func] = (calls - b_calls, own - b_own, cum - b_cum)
    return out


# (label, file suffix, function name): cumulative CPU of these calls wherever they run.
CALLS = (
    ("moto parsing state machine definitions", "asl/parse/asl_parser.py", "parse"),
    ("building boto3 clients", "boto3/session.py", "client"),
)


def where_time_goes(delta: Mapping[str, Stats], top: int = 7) -> str:
    by_kind = {kind: sum(own for _n, own, _c in stats.values()) for kind, stats in delta.items()}
    total = sum(by_kind.values())
    if total <= 0:
        return "no CPU profiled"
    calls = []
    for label, suffix, name in CALLS:
        cum = sum(
            c
            for stats in delta.values()
            for (path, _line, fn), (_n, _o, c) in stats.items()
            if fn == name and path.endswith(suffix)
        )
        calls.append(f"{label} {100 * cum / total:.0f}%")
    threads = ", ".join(
        f"{kind} {100 * cpu / total:.0f}%"
        for kind, cpu in sorted(by_kind.items(), key=lambda kv: kv[1], reverse=True)[:top]
    )
    merged: dict[tuple[str, int, str], float] = {}
    for stats in delta.values():
        for func, (_n, own, _c) in stats.items():
            merged[func] = merged.get(func, 0.0) + own
    heavy = ", ".join(
        f"{os.path.basename(path)}:{fn} {100 * own / total:.0f}%"
        for (path, _line, fn), own in sorted(merged.items(), key=lambda kv: kv[1], reverse=True)[:5]
    )
    return (
        f"CPU {total:.1f} s in the window (cProfile overhead included). By thread: {threads}. "
        f"Within them: {'; '.join(calls)}. Most own CPU: {heavy}"
    )


# --------------------------------------------------------------------------- the sandbox side


def _items(layout: str, files: int) -> list[tuple[str, bytes]]:
    from bench.e2e import workload

    return workload(files, files_per_folder=5, root_share=0.2)


def _jobs(layout: str, items: Sequence[tuple[str, bytes]]) -> int:
    from bench.e2e import expected_jobs

    return expected_jobs([k for k, _ in items], _FOLDER_DEPTH[layout])


@dataclass
class SandboxRun:
    wall_s: float
    idle: bool
    jobs: int
    warmup_calls: list[RecordedCall]
    calls: list[RecordedCall]
    resources: dict[str, Any]
    bucket: str
    unreplayable: Counter[str]
    profile: str = ""


def _snapshot_resources(sb: Any) -> dict[str, Any]:
    """What the handlers' calls need to exist in bare moto: read from the sandbox (untimed)."""
    ddb, sqs, s3 = sb.client("dynamodb"), sb.client("sqs"), sb.client("s3")
    sfn, ssm = sb.client("stepfunctions"), sb.client("ssm")
    tables = [ddb.describe_table(TableName=t)["Table"] for t in ddb.list_tables()["TableNames"]]
    queues = []
    for url in sqs.list_queues().get("QueueUrls", []):
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        queues.append((url.rsplit("/", 1)[-1], attributes))
    buckets = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    machines = [
        sfn.describe_state_machine(stateMachineArn=m["stateMachineArn"])
        for m in sfn.list_state_machines()["stateMachines"]
    ]
    parameters = [
        ssm.get_parameter(Name=p["Name"], WithDecryption=True)["Parameter"]
        for page in ssm.get_paginator("describe_parameters").paginate()
        for p in page["Parameters"]
    ]
    return {"tables": tables, "queues": queues, "buckets": buckets, "machines": machines, "parameters": parameters}


def run_sandbox(layout: str, files: int, *, profiler: ThreadProfiler | None = None, timeout: float = 300.0) -> SandboxRun:
    from sandbox.sandbox import Sandbox

    items = _items(layout, files)
    recorder = CallRecorder().install()
    try:
        with Sandbox(parameters=layout_parameters(layout)) as sb:
            logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
            from pipeline.handlers import _wiring

            _wiring.reset()
            resources = _snapshot_resources(sb)
            s3, bucket = sb.client("s3"), sb.outputs["InputBucketName"]
            s3.put_object(Bucket=bucket, Key=WARMUP_KEY, Body=items[0][1])
            sb.wait_until_idle(120)
            with recorder._lock:
                warmup_calls, recorder.calls = recorder.calls, []
            gc.collect()  # the previous run's garbage is not collected inside this window
            before = profiler.snapshot() if profiler else {}
            started = time.perf_counter()
            for key, body in items:
                s3.put_object(Bucket=bucket, Key=key, Body=body)
            idle = sb.wait_until_idle(timeout)
            wall = time.perf_counter() - started
            profile = where_time_goes(stats_delta(before, profiler.snapshot())) if profiler else ""
            with recorder._lock:
                calls = list(recorder.calls)
    finally:
        recorder.uninstall()
    return SandboxRun(
        wall_s=wall,
        idle=idle,
        jobs=_jobs(layout, items),
        warmup_calls=warmup_calls,
        calls=calls,
        resources=resources,
        bucket=bucket,
        unreplayable=recorder.unreplayable,
        profile=profile,
    )


# --------------------------------------------------------------------------- the bare side


def _create_resources(session: Any, region: str, resources: Mapping[str, Any]) -> None:
    ddb = session.client("dynamodb", region_name=region)
    for table in resources["tables"]:
        spec: dict[str, Any] = {
            "TableName": table["TableName"],
            "KeySchema": table["KeySchema"],
            "AttributeDefinitions": table["AttributeDefinitions"],
            "BillingMode": "PAY_PER_REQUEST",
        }
        for kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            if table.get(kind):
                spec[kind] = [
                    {"IndexName": i["IndexName"], "KeySchema": i["KeySchema"], "Projection": i["Projection"]}
                    for i in table[kind]
                ]
        ddb.create_table(**spec)
    sqs = session.client("sqs", region_name=region)
    kept = ("VisibilityTimeout", "DelaySeconds", "MessageRetentionPeriod", "FifoQueue", "ContentBasedDeduplication",
            "ReceiveMessageWaitTimeSeconds", "MaximumMessageSize")
    for name, attributes in resources["queues"]:
        sqs.create_queue(QueueName=name, Attributes={k: v for k, v in attributes.items() if k in kept})
    for name, attributes in resources["queues"]:
        if attributes.get("RedrivePolicy"):
            url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": attributes["RedrivePolicy"]})
    s3 = session.client("s3", region_name=region)
    for name in resources["buckets"]:
        s3.create_bucket(Bucket=name)
    sfn = session.client("stepfunctions", region_name=region)
    for machine in resources["machines"]:
        sfn.create_state_machine(name=machine["name"], definition=machine["definition"], roleArn=machine["roleArn"])
    ssm = session.client("ssm", region_name=region)
    for p in resources["parameters"]:
        ssm.put_parameter(Name=p["Name"], Value=p["Value"], Type=p["Type"], Overwrite=True)


@dataclass
class Replay:
    """What a replay did: seconds spent on the workflow's own (untimed) calls, the errors of the
    handler calls, and the handler calls whose outcome differs from the sandbox's."""

    untimed_s: float = 0.0
    errors: Counter[str] = field(default_factory=Counter)
    mismatches: Counter[str] = field(default_factory=Counter)


def _replay(clients: dict[tuple[str, str], Any], session: Any, calls: Sequence[RecordedCall],
            replay: Replay | None = None) -> Replay:
    from botocore import xform_name

    replay = replay if replay is not None else Replay()
    for call in calls:
        key = (call.service, call.region)
        client = clients.get(key)
        if client is None:
            client = clients[key] = session.client(call.service, region_name=call.region)
        started = time.perf_counter()
        failure: Exception | None = None
        try:
            response = getattr(client, xform_name(call.operation))(**call.params)
        except Exception as exc:  # replayed state can differ (a receipt handle, a raced condition)
            failure, response = exc, None
        if call.workflow:
            replay.untimed_s += time.perf_counter() - started
            continue
        outcome = outcome_of(failure)
        if failure is not None:
            replay.errors[f"{call.label}: {outcome}"] += 1
        if call.outcome is not None and outcome != call.outcome:
            replay.mismatches[f"{call.label}: sandbox {call.outcome}, bare {outcome}"] += 1
        body = response.get("Body") if isinstance(response, dict) else None
        if body is not None and hasattr(body, "read"):
            body.read()  # the handler read it too
    return replay


@dataclass(frozen=True)
class BareRun:
    seconds: float
    calls: int
    mismatches: Counter[str]


def run_bare(run: SandboxRun, items: Sequence[tuple[str, bytes]], region: str = "us-east-1") -> BareRun:
    """The uploads and the recorded handler calls on a fresh bare moto, timed (see the module doc)."""
    import boto3
    from moto import mock_aws

    with mock_aws(config={"stepfunctions": {"execute_state_machine": False}}):
        session = boto3.session.Session(
            aws_access_key_id="bench", aws_secret_access_key="bench", region_name=region
        )
        _create_resources(session, region, run.resources)
        clients: dict[tuple[str, str], Any] = {}
        s3 = clients[("s3", region)] = session.client("s3", region_name=region)
        s3.put_object(Bucket=run.bucket, Key=WARMUP_KEY, Body=items[0][1])
        for call in {(c.service, c.region) for c in [*run.warmup_calls, *run.calls]}:
            clients.setdefault(call, session.client(call[0], region_name=call[1]))  # type: ignore[call-overload]  # a service named at run time: the stubs type literal names only
        _replay(clients, session, run.warmup_calls)
        gc.collect()  # the sandbox run's garbage (it just stopped) is not collected in this window
        started = time.perf_counter()
        for key, body in items:
            s3.put_object(Bucket=run.bucket, Key=key, Body=body)
        replay = _replay(clients, session, run.calls)
        seconds = time.perf_counter() - started - replay.untimed_s
    handler_calls = sum(1 for c in run.calls if not c.workflow)
    return BareRun(seconds=seconds, calls=handler_calls, mismatches=replay.mismatches)


# --------------------------------------------------------------------------- measure


@dataclass(frozen=True)
class LayoutResult:
    layout: str
    jobs: int
    sandbox_jps: list[float]
    bare_jps: list[float]
    ratios: list[float]
    calls_per_job: float
    workflow_calls_per_job: float
    replay_mismatches: Counter[str]  # handler calls that ended otherwise on bare moto than in the sandbox
    all_idle: bool

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)


def measure_layout(layout: str, files: int, repeat: int) -> LayoutResult:
    items = _items(layout, files)
    sandbox_jps, bare_jps, ratios, calls, workflow_calls = [], [], [], [], []
    mismatches: Counter[str] = Counter()
    all_idle = True
    for _ in range(repeat):
        run = run_sandbox(layout, files)
        bare = run_bare(run, items)
        s_jps, b_jps = run.jobs / run.wall_s, run.jobs / bare.seconds
        sandbox_jps.append(s_jps)
        bare_jps.append(b_jps)
        ratios.append(s_jps / b_jps)
        calls.append(bare.calls / run.jobs)
        workflow_calls.append((len(run.calls) - bare.calls) / run.jobs)
        mismatches.update(bare.mismatches)
        all_idle = all_idle and run.idle
    return LayoutResult(layout, _jobs(layout, items), sandbox_jps, bare_jps, ratios, statistics.median(calls),
                        statistics.median(workflow_calls), mismatches, all_idle)


def profile_run(layout: str = "single", files: int = 50) -> str:
    profiler = ThreadProfiler().install()
    try:
        run = run_sandbox(layout, files, profiler=profiler)
    finally:
        profiler.uninstall()
    if run.idle:
        return run.profile
    return (f"WARNING: the profiled run did not reach idle within its timeout ({run.wall_s:.0f} s in the window): "
            f"the shares below include that wait (background threads polling). {run.profile}")


@contextmanager
def _bench_env() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                                            "AWS_ENDPOINT_URL")}
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ.setdefault(name, value)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _row(result: LayoutResult, label: str) -> GoalRow:
    detail = (
        f"{result.jobs} jobs, {len(result.ratios)} runs, medians: sandbox "
        f"{statistics.median(result.sandbox_jps):.2f} jobs/s (uploads to idle, every part of the sandbox "
        f"included), bare moto {statistics.median(result.bare_jps):.2f} jobs/s (the uploads and the "
        f"{result.calls_per_job:.1f} recorded handler calls per job replayed in order, no sandbox, no ASL "
        f"interpreter; the workflow's own {result.workflow_calls_per_job:.1f} writes per job replayed "
        f"between them, untimed); ratios {', '.join(f'{100 * r:.1f}%' for r in result.ratios)}"
    )
    if result.replay_mismatches:
        top = ", ".join(f"{k} x{n}" for k, n in result.replay_mismatches.most_common(3))
        detail += f"; handler calls that ended otherwise on bare moto than in the sandbox: {top}"
    else:
        detail += "; every replayed handler call ended as it did in the sandbox"
    if not result.all_idle:
        detail += "; WARNING: a sandbox run did not reach idle"
    waits = ", ".join(f"{k}={v}" for k, v in minimal_waits().items())
    if LAYOUT_INFO[result.layout][1]:
        detail += (f"; designed waits at the template minimum on the sandbox ({waits} s; bare moto has "
                   f"none), see the module doc")
    else:
        scaled = ", ".join(f"{k}={v}" for k, v in default_waits().items())
        detail += (f"; the template's default designed waits, time-scaled by the sandbox ({scaled} s): the "
                   f"pipeline's waits, which bare moto skips")
    return GoalRow(
        measure=f"sandbox jobs/s vs the same handler calls on bare moto, {label}",
        now=f"{100 * result.ratio:.1f}%",
        goal="- (reported: the simulator's speed)",
        met=True,
        detail=detail,
    )


def measure(
    files: int = 50,
    repeat: int = 5,
    profile: bool = True,
    layouts: Sequence[str] = tuple(LAYOUT_INFO),
    profile_files: int = 25,
) -> list[GoalRow]:
    """About 4-5 minutes on a shared 2-core machine with the defaults (3 layouts x 5 runs + a profiled
    run, which cProfile slows several times over: hence its fewer files). Five runs, not three: a
    shared machine's speed drifts by a factor of two within minutes, and each run's ratio pairs a
    sandbox run with the bare run right after it."""
    with _bench_env():
        rows = [_row(measure_layout(layout, files, repeat), LAYOUT_INFO[layout][0]) for layout in layouts]
        if profile:
            rows.append(
                GoalRow(
                    measure=f"where the sandbox's time goes ({profile_files} single-file jobs, per-thread cProfile)",
                    now="see detail",
                    goal="-",
                    met=True,
                    detail=profile_run("single", profile_files),
                )
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sandbox_ratio", description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--profile-files", type=int, default=25, help="files in the profiled run")
    parser.add_argument("--profile-only", action="store_true")
    parser.add_argument("--layouts", default=",".join(LAYOUT_INFO), help=f"of {', '.join(LAYOUT_INFO)}")
    args = parser.parse_args(argv)
    if args.profile_only:
        with _bench_env():
            print(profile_run("single", args.profile_files))
        return 0
    layouts = [name for name in args.layouts.split(",") if name]
    rows = measure(args.files, args.repeat, profile=not args.no_profile, layouts=layouts,
                   profile_files=args.profile_files)
    for row in rows:
        print(f"{row.measure}: {row.now}\n    {row.detail}")
    print("(machine shared with other work while measured: numbers are noisy)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
