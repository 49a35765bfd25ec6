"""End-to-end benchmark of the reference pipeline on the in-process sandbox; writes its section of docs/PERFORMANCE.md.

    .venv/bin/python -m bench.e2e                      # default: ~3-4 minutes on 2 cores
    .venv/bin/python -m bench.e2e --quick              # ~1 minute
    .venv/bin/python -m bench.e2e --files 200 --files-per-folder 10 --repeat 5 --out perf.md
    .venv/bin/python -m bench.e2e --json results.json   # keep the raw results; --render results.json re-renders

One run measures, in one process:
1. Whole-pipeline throughput. Per configuration and repetition: a fresh `Sandbox` (its start-up --
   moto, runtime, deploy, poller, bus -- timed on its own), one warm-up file processed to idle,
   then N files uploaded and the wall time from the first upload until `wait_until_idle` returns.
2. AWS API calls per job, counted by a botocore `before-call` handler that every session in the
   process gets (appended to `botocore.handlers.BUILTIN_HANDLERS` before any session exists;
   moto's own interception hooks in the same way). Each call is attributed by thread and
   credentials: handler code runs on the runtime's `lambda:<function>:<id>` worker threads; moto's
   ASL interpreter builds its clients with the access key "ak" (`boto_client_for`); everything else
   is sandbox machinery (poller, event bus, status watcher, the runtime's log and metric writes)
   or the benchmark itself. A counter on `BaseClient._make_api_call` cross-checks the total.
3. Raw moto throughput (`bench.raw_moto`): isolated operations, the floor under the sandbox. The
   sandbox-to-bare-moto ratio for the same handler calls is `bench.sandbox_ratio`'s.

It writes its tables into the `<!-- bench:e2e -->` section of the report (`bench.report`,
`bench.sections`) and leaves the rest alone: the analysis around them is written by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import json
import logging
import os
import platform
import random
import re
import resource
import statistics
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = PROJECT_ROOT / "docs" / "PERFORMANCE.md"
WARMUP_KEY = "bench-warmup.txt"
_WARMUP_EXECUTION_PREFIX = "bench-warmup-txt-"
_FAILED_EVENTS = frozenset({"TaskFailed", "TaskTimedOut", "LambdaFunctionFailed", "LambdaFunctionTimedOut"})
HISTORY_SAMPLE = 5  # executions per run whose history is read for the per-state timing

# --------------------------------------------------------------------------- API call counting

_THREAD_SUFFIX = re.compile(r"[-_:]?[0-9a-f]{6,}.*$|[- ]\(?\d+\)?.*$")


class ApiCallCounter:
    """Counts every botocore API call made in this process, attributed to who made it.

    `install()` must run before any boto3/botocore session is created: the `before-call` handler
    is appended to botocore's built-in handlers, which each new session registers (this is how
    moto's own `botocore_stubber` reaches every client). A session that already existed (boto3's
    default session) is registered on explicitly. The patched `_make_api_call` only counts, as a
    cross-check that the event hook saw every call.
    """

    def __init__(self) -> None:
        self.enabled = False
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str, str, str]] = Counter()
        self._direct_total = 0
        self._function_names: dict[str, str] = {}
        self._original_make_api_call: Any = None

    # -- install

    def install(self) -> Self:
        import boto3
        import botocore.client
        import botocore.handlers

        botocore.handlers.BUILTIN_HANDLERS.append(("before-call", self._before_call))
        if boto3.DEFAULT_SESSION is not None:  # created before us: register on it too
            boto3.DEFAULT_SESSION._session.register("before-call", self._before_call)
        original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]  # botocore private
        self._original_make_api_call = original
        counter = self

        def _make_api_call(client: Any, operation_name: str, api_params: Any) -> Any:
            if counter.enabled:
                with counter._lock:
                    counter._direct_total += 1
            return original(client, operation_name, api_params)

        botocore.client.BaseClient._make_api_call = _make_api_call  # type: ignore[attr-defined]  # botocore private, not in its stubs
        return self

    def uninstall(self) -> None:
        import botocore.client
        import botocore.handlers

        self.enabled = False
        with contextlib.suppress(ValueError):
            botocore.handlers.BUILTIN_HANDLERS.remove(("before-call", self._before_call))
        if self._original_make_api_call is not None:
            botocore.client.BaseClient._make_api_call = self._original_make_api_call  # type: ignore[attr-defined]
            self._original_make_api_call = None

    # -- counting

    def name_functions(self, physical_to_logical: Mapping[str, str]) -> None:
        self._function_names = dict(physical_to_logical)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._direct_total = 0

    def snapshot(self) -> tuple[list[dict[str, Any]], int]:
        """([{origin, component, service, operation, calls}], calls seen by the _make_api_call counter)."""
        with self._lock:
            rows = [
                {"origin": o, "component": c, "service": s, "operation": op, "calls": n}
                for (o, c, s, op), n in sorted(self._counts.items())
            ]
            return rows, self._direct_total

    def _before_call(self, model: Any = None, request_signer: Any = None, **_: Any) -> None:
        # Must return None: a value returned from before-call short-circuits the request.
        if not self.enabled or model is None:
            return
        try:
            key = (*self._attribute(model, request_signer), model.service_model.service_name, model.name)
        except Exception:  # never break a call because of the benchmark
            key = ("unknown", "unknown", "unknown", "unknown")
        with self._lock:
            self._counts[key] += 1

    def _attribute(self, model: Any, request_signer: Any) -> tuple[str, str]:
        thread = threading.current_thread().name
        if thread.startswith("lambda:"):
            physical = thread.split(":")[1]
            return "handler", self._function_names.get(physical, physical)
        credentials = getattr(request_signer, "_credentials", None)
        if getattr(credentials, "access_key", None) == "ak":
            return "stepfunctions", "ASL interpreter (Task states)"
        service = model.service_model.service_name
        if service in ("logs", "cloudwatch"):
            return "sandbox", "Lambda runtime: logs + EMF metrics"
        if thread.startswith("sqs-poller"):
            return "sandbox", "SQS event-source poller"
        if thread == "sandbox-sfn-status":
            return "sandbox", "execution status watcher"
        if thread.startswith("sandbox-eventbus"):
            return "sandbox", "event bus"
        if thread == "MainThread":
            if service == "s3" and model.name == "PutObject":
                return "driver", "benchmark uploads"
            return "driver", "wait_until_idle"
        return "sandbox", f"other ({_THREAD_SUFFIX.sub('', thread)})"


# --------------------------------------------------------------------------- CPU by thread

_TASK_DIR = Path("/proc/self/task")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _thread_kind(name: str, functions: Mapping[str, str]) -> str:
    """Who a thread works for, from its name (the sandbox names its threads; moto's are Thread-N (target))."""
    if name.startswith("lambda:"):
        physical = name.split(":")[1]
        return f"handler: {functions.get(physical, physical)}"
    if name.startswith("sqs-poller"):
        return "SQS poller (+ Router invokes, their logs/metrics)"
    if name.startswith("sandbox-eventbus"):
        return "event bus (+ Ingest/Tracker invokes, their logs/metrics)"
    if name == "sandbox-sfn-status":
        return "execution status watcher"
    if name == "MainThread":
        return "benchmark main thread (uploads, wait_until_idle)"
    match = re.match(r"Thread-\d+ \((\w+)\)$", name)
    if match:
        return f"Step Functions interpreter ({match.group(1)})"
    return f"other: {_THREAD_SUFFIX.sub('', name)}"


class ThreadCpuMeter:
    """CPU seconds per kind of thread over a window (Linux).

    Threads alive at either end of the window are read from /proc/self/task/<tid>/stat; threads
    that end inside it (Lambda workers, Step Functions threads) report `time.thread_time()` as
    they exit, through a wrapper around `Thread._bootstrap_inner` installed by `install()`.
    """

    def __init__(self) -> None:
        self.available = _TASK_DIR.is_dir()
        self._lock = threading.Lock()
        self._open = False
        self._baseline: dict[int, float] = {}
        self._exits: dict[int, tuple[str, float]] = {}
        self._original: Any = None

    def install(self) -> ThreadCpuMeter:
        if not self.available:
            return self
        original = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]
        self._original = original
        meter = self

        def _bootstrap_inner(thread: threading.Thread) -> None:
            try:
                original(thread)
            finally:
                if meter._open:
                    with meter._lock:
                        meter._exits[threading.get_native_id()] = (thread.name, time.thread_time())

        threading.Thread._bootstrap_inner = _bootstrap_inner  # type: ignore[attr-defined]
        return self

    def uninstall(self) -> None:
        if self._original is not None:
            threading.Thread._bootstrap_inner = self._original  # type: ignore[attr-defined]
            self._original = None

    @staticmethod
    def _read() -> dict[int, float]:
        cpu: dict[int, float] = {}
        for task in _TASK_DIR.iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                cpu[int(task.name)] = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
        return cpu

    def start(self) -> None:
        if not self.available:
            return
        with self._lock:
            self._exits.clear()
            self._baseline = self._read()
            self._open = True

    def stop(self, functions: Mapping[str, str]) -> dict[str, float]:
        """{thread kind: CPU seconds inside the window}."""
        if not self.available:
            return {}
        live = self._read()
        names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
        with self._lock:
            self._open = False
            exits = dict(self._exits)
        spent: defaultdict[str, float] = defaultdict(float)  # CPU seconds by thread kind
        for tid, (name, cpu) in exits.items():
            spent[_thread_kind(name, functions)] += max(0.0, cpu - self._baseline.get(tid, 0.0))
        for tid, cpu in live.items():
            if tid in exits or tid not in names:
                continue
            spent[_thread_kind(names[tid], functions)] += max(0.0, cpu - self._baseline.get(tid, 0.0))
        return {kind: round(seconds, 3) for kind, seconds in sorted(spent.items(), key=lambda kv: -kv[1])}


def asl_parse_ms(definition: str, repeats: int = 5) -> float | None:
    """CPU milliseconds moto spends parsing a definition (it does so at every execution start)."""
    try:
        from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    except ImportError:
        return None
    samples = []
    for _ in range(repeats):
        started = time.thread_time()
        AmazonStateLanguageParser.parse(definition)
        samples.append((time.thread_time() - started) * 1000)
    return round(statistics.median(samples), 1)


# --------------------------------------------------------------------------- workload

_FIRST = ("Maria", "James", "Aisha", "Wei", "Olga", "Diego", "Fatima", "Liam", "Priya", "Noah", "Ingrid", "Kenji")
_LAST = ("Garcia", "Smith", "Khan", "Chen", "Petrova", "Silva", "Haddad", "Murphy", "Iyer", "Berg", "Tanaka", "Okafor")
_DOMAINS = ("example.com", "mail.example.org", "corp.example.net", "example.co.uk")
_FILLER = (
    "The account was reviewed by the operations team and no further action is required at this time.",
    "Please keep this note with the case file until the quarterly audit has been completed.",
    "The customer asked for a written confirmation, which was sent the same afternoon.",
    "Shipping was delayed by two days because of a warehouse inventory recount.",
    "Our records show that the previous ticket was closed without a resolution summary.",
    "The escalation was handled within the agreed service level and the customer was satisfied.",
    "Attached invoices were reconciled against the ledger; two line items still need approval.",
    "A follow-up call is scheduled for next week to confirm the configuration change.",
)


def _luhn_complete(payload: str) -> str:
    total = 0
    for i, char in enumerate(reversed(payload)):
        d = int(char)
        if i % 2 == 0:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return payload + str((10 - total % 10) % 10)


def _iban(rng: random.Random) -> str:
    bban = "".join(rng.choice("0123456789") for _ in range(18))  # DE: 22 characters
    rearranged = bban + "DE00"
    check = 98 - int("".join(str(int(c, 36)) for c in rearranged)) % 97
    raw = f"DE{check:02d}{bban}"
    return " ".join(raw[i : i + 4] for i in range(0, len(raw), 4))


def document(rng: random.Random, index: int) -> str:
    """A few KB of support-ticket prose with names, emails, phones, SSNs, cards, IBANs and IPs."""
    target = rng.randint(2000, 6000)
    lines = [f"Case {100000 + index}: customer correspondence and payment notes", ""]
    size = sum(len(line) + 1 for line in lines)
    while size < target:
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        email = f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@{rng.choice(_DOMAINS)}"
        phone = f"({rng.randint(201, 989)}) {rng.randint(200, 999)}-{rng.randint(1000, 9999)}"
        ssn = f"{rng.randint(100, 665):03d}-{rng.randint(10, 99):02d}-{rng.randint(1000, 9999):04d}"
        card = _luhn_complete("4" + "".join(rng.choice("0123456789") for _ in range(14)))
        card = " ".join(card[i : i + 4] for i in range(0, 16, 4))
        ip = f"{rng.randint(11, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        sentence = rng.choice(
            (
                f"{first} {last} ({email}) called from {phone} about an overdue invoice.",
                f"A payment of ${rng.randint(10, 5000)}.{rng.randint(0, 99):02d} was charged to card {card}.",
                f"The refund goes to IBAN {_iban(rng)} once {first} {last} confirms by email to {email}.",
                f"A login from {ip} was flagged; the account holder was reached at {phone}.",
                f"SSN {ssn} was verified against the application submitted by {first} {last}.",
            )
        )
        for line in (sentence, rng.choice(_FILLER), rng.choice(_FILLER)):
            lines.append(line)
            size += len(line) + 1
    return "\n".join(lines) + "\n"


def workload(files: int, files_per_folder: int, root_share: float, seed: int = 7) -> list[tuple[str, bytes]]:
    """(key, body): `root_share` of the files at the bucket root, the rest in folders."""
    rng = random.Random(seed)
    roots = round(files * root_share)
    extensions = (".txt", ".txt", ".txt", ".md", ".log")
    items: list[tuple[str, bytes]] = []
    for i in range(files):
        ext = extensions[i % len(extensions)]
        if i < files - roots:
            key = f"batch-{i // files_per_folder:03d}/ticket-{i:04d}{ext}"
        else:
            key = f"ticket-{i:04d}{ext}"
        items.append((key, document(rng, i).encode()))
    return items


def expected_jobs(keys: Sequence[str], folder_depth: int) -> int:
    def job(key: str) -> str:
        parts = key.split("/")
        return key if folder_depth <= 0 or len(parts) == 1 else "/".join(parts[:-1][:folder_depth]) + "/"

    return len({job(k) for k in keys})


# --------------------------------------------------------------------------- configurations


@dataclass(frozen=True)
class Config:
    name: str
    description: str
    parameters: Mapping[str, str]
    folder_depth: int


CONFIGS = {
    "folders": Config(
        "folders",
        "realtime, JobFolderDepth 1: files in folders form one job per folder, root-level files are single-file jobs",
        {"ProcessingMode": "realtime", "JobFolderDepth": "1"},
        1,
    ),
    "single": Config(
        "single",
        "realtime, JobFolderDepth 0: every file is its own job (same files)",
        {"ProcessingMode": "realtime", "JobFolderDepth": "0"},
        0,
    ),
    "synthetic": Config(
        "synthetic",
        "as `folders`, RedactionMode synthetic (adds the GenerateSynthetic step per job)",
        {"ProcessingMode": "realtime", "JobFolderDepth": "1", "RedactionMode": "synthetic"},
        1,
    ),
}


# --------------------------------------------------------------------------- one run


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).timestamp()
    return float(value)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _function_settings(sb: Any) -> dict[str, Any]:
    """The waits that bound latency, as deployed (after the sandbox's time scaling)."""
    awslambda = sb.client("lambda")
    outputs = sb.outputs
    ingest = awslambda.get_function_configuration(FunctionName=outputs["IngestFunctionName"])
    router = awslambda.get_function_configuration(FunctionName=outputs["RouterFunctionName"])
    env = ingest.get("Environment", {}).get("Variables", {})
    mappings = awslambda.list_event_source_mappings(FunctionName=outputs["RouterFunctionName"])["EventSourceMappings"]
    mapping = mappings[0] if mappings else {}
    scale = sb.time_scale.factor
    return {
        "time_scale": scale,
        "max_concurrent_workflows": int(env.get("MAX_CONCURRENT_WORKFLOWS", 0) or 0),
        "folder_settle_seconds": float(env.get("FOLDER_SETTLE_SECONDS", 0) or 0),
        "capacity_retry_seconds": float(env.get("CAPACITY_RETRY_SECONDS", 0) or 0),
        "router_timeout_real_s": round(float(router.get("Timeout", 3)) * scale, 2),
        "router_batch_size": mapping.get("BatchSize"),
        "router_batching_window_real_s": round(float(mapping.get("MaximumBatchingWindowInSeconds", 0) or 0) * scale, 3),
        "main_queue_visibility_real_s": _visibility(sb) * scale,
        "status_watcher_interval_s": getattr(sb.bus, "poll_interval", None),
    }


def _visibility(sb: Any) -> float:
    attributes = sb.client("sqs").get_queue_attributes(
        QueueUrl=sb.outputs["MainQueueUrl"], AttributeNames=["VisibilityTimeout"]
    )["Attributes"]
    return float(attributes.get("VisibilityTimeout", 0))


def retry_errors(definition: Mapping[str, Any]) -> set[str]:
    """Every error name a Retry of the definition lists (nested Map processors included)."""
    found: set[str] = set()
    for state in definition.get("States", {}).values():
        for retrier in state.get("Retry", []):
            found.update(retrier.get("ErrorEquals", []))
        for key in ("ItemProcessor", "Iterator"):
            if key in state:
                found |= retry_errors(state[key])
        for branch in state.get("Branches", []):
            found |= retry_errors(branch)
    return found


def _retried(events: Sequence[Mapping[str, Any]], retryable: set[str]) -> int:
    """Failed Task attempts whose error a Retry lists (each one waited at least the Retry interval)."""
    count = 0
    for event in events:
        if event["type"] in _FAILED_EVENTS:
            details: Mapping[str, Any] = next((v for k, v in event.items() if k.endswith("EventDetails")), {})
            if details.get("error") in retryable or "States.ALL" in retryable:
                count += 1
    return count


def _state_times(history: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Seconds spent in each state (summed over Map items), from one execution's history."""
    entered: dict[str, list[float]] = {}
    spent: dict[str, float] = {}
    for event in history:
        kind = event["type"]
        when = _epoch(event["timestamp"]) or 0.0
        if kind.endswith("StateEntered"):
            name = event["stateEnteredEventDetails"]["name"]
            entered.setdefault(name, []).append(when)
        elif kind.endswith("StateExited"):
            name = event["stateExitedEventDetails"]["name"]
            if entered.get(name):
                spent[name] = spent.get(name, 0.0) + when - entered[name].pop(0)
    return spent


def _error_message(payload: str, limit: int = 240) -> str:
    try:
        doc = json.loads(payload)
    except ValueError:
        return payload[:limit]
    return str(doc.get("errorMessage", "") if isinstance(doc, dict) else doc)[:limit]


def _failure_detail(sfn: Any, execution: Mapping[str, Any], retryable: set[str]) -> dict[str, Any]:
    """Why an execution did not succeed: its error and the failed events of its history."""
    described = sfn.describe_execution(executionArn=execution["executionArn"])
    history = sfn.get_execution_history(executionArn=execution["executionArn"], maxResults=1000)["events"]
    events = []
    for event in history:
        if event["type"] in _FAILED_EVENTS or event["type"] == "ExecutionFailed":
            details: Mapping[str, Any] = next((v for k, v in event.items() if k.endswith("EventDetails")), {})
            events.append(
                {"type": event["type"], "error": details.get("error", ""), "cause": str(details.get("cause", ""))[:240]}
            )
    return {
        "name": execution["name"],
        "status": execution["status"],
        "error": described.get("error", ""),
        "cause": str(described.get("cause", ""))[:240],
        "events": events[:6],
        "retried_failures": _retried(history, retryable),
    }


def _function_stats(invocations: Sequence[Any], names: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    grouped: dict[str, list[Any]] = {}
    for record in invocations:
        grouped.setdefault(names.get(record.function_name, record.function_name), []).append(record)
    stats: dict[str, dict[str, Any]] = {}
    for name, records in sorted(grouped.items()):
        durations = [r.duration_ms for r in records]
        stats[name] = {
            "invocations": len(records),
            "errors": dict(Counter(r.error_type for r in records if r.errored)),
            "timeouts": sum(1 for r in records if r.timed_out),
            "median_ms": round(statistics.median(durations), 1),
            "max_ms": round(max(durations), 1),
            "total_s": round(sum(durations) / 1000, 2),
        }
    return stats


def run_once(
    config: Config,
    items: Sequence[tuple[str, bytes]],
    counter: ApiCallCounter,
    meter: ThreadCpuMeter,
    *,
    time_scale: float,
    timeout: float,
    warmup: bool,
) -> dict[str, Any]:
    """One run: a fresh sandbox, the warm-up, the timed window, then what happened (untimed)."""
    from sandbox.clock import TimeScale
    from sandbox.sandbox import Sandbox

    result: dict[str, Any] = {"load_before": _load()}
    started = time.perf_counter()
    sb = Sandbox(parameters=dict(config.parameters), time_scale=TimeScale(time_scale))
    sb.start()
    try:
        result["startup_s"] = time.perf_counter() - started
        # Sandbox.start() sets it to ERROR; failed executions would print huge reprs (tests use CRITICAL too).
        logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
        from pipeline.handlers import _wiring  # after the runtime is installed (stdout routing)

        _wiring.reset()
        outputs = sb.outputs
        names = {outputs[k]: k.removesuffix("Name") for k in outputs if k.endswith("FunctionName")}
        counter.name_functions(names)
        result |= _warm_up(sb, items[0][1]) if warmup else {"warmup_s": 0.0}
        assert sb.runtime is not None  # a started sandbox has its Lambda runtime
        sb.runtime.clear_invocations()
        t0 = time.time()
        result |= _timed_window(sb, items, counter, meter, names, timeout)
        result |= _what_happened(sb, config, items, names, t0)
        complete = result["run_statuses"].get("COMPLETE", 0)
        result["ok"] = bool(result["idle"]) and complete == result["runs"] and result["runs"] >= result["jobs_expected"]
        result["files_per_s"] = len(items) / result["wall_s"]
        result["jobs_per_s"] = complete / result["wall_s"]
    finally:
        counter.enabled = False
        sb.stop()
    return result


def _warm_up(sb: Any, body: bytes) -> dict[str, Any]:
    """Every function runs once, alone, so each builds its settings while no other function's
    environment is applied (a cold burst once poisoned the router's settings)."""
    started = time.perf_counter()
    sb.client("s3").put_object(Bucket=sb.outputs["InputBucketName"], Key=WARMUP_KEY, Body=body)
    idle = sb.wait_until_idle(60)
    return {
        "warmup_idle": idle,
        "warmup_s": time.perf_counter() - started,
        "warmup_errors": sum(1 for r in sb.runtime.invocations if r.errored),
    }


def _timed_window(
    sb: Any,
    items: Sequence[tuple[str, bytes]],
    counter: ApiCallCounter,
    meter: ThreadCpuMeter,
    names: Mapping[str, str],
    timeout: float,
) -> dict[str, Any]:
    """Upload every file, wait for idle; the calls and CPU of that window."""
    s3, bucket = sb.client("s3"), sb.outputs["InputBucketName"]
    counter.reset()
    counter.enabled = True
    meter.start()
    cpu_started = _cpu_seconds()
    began = time.perf_counter()
    for key, body in items:
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    window: dict[str, Any] = {"upload_s": time.perf_counter() - began}
    window["idle"] = sb.wait_until_idle(timeout)
    window["wall_s"] = time.perf_counter() - began
    window["cpu_s"] = _cpu_seconds() - cpu_started
    window["cpu_by_thread"] = meter.stop(names)
    counter.enabled = False
    window["calls"], window["calls_direct_total"] = counter.snapshot()
    window["load_after"] = _load()
    return window


def _state_time_samples(sfn: Any, executions: Sequence[Mapping[str, Any]], retryable: Any) -> list[dict[str, float]]:
    """Seconds per state of at most HISTORY_SAMPLE executions, spread evenly from first to last started."""
    picks = {round(j * (len(executions) - 1) / max(1, HISTORY_SAMPLE - 1)) for j in range(HISTORY_SAMPLE)}
    samples = []
    for execution in [executions[i] for i in sorted(picks)] if executions else []:
        history = sfn.get_execution_history(executionArn=execution["executionArn"], maxResults=1000)["events"]
        times = _state_times(history)
        times["(execution)"] = (_epoch(execution.get("stopDate")) or 0) - (_epoch(execution["startDate"]) or 0)
        times["(transitions)"] = float(sum(1 for e in history if e["type"].endswith("StateEntered")))
        times["(failed events)"] = float(sum(1 for e in history if e["type"] in _FAILED_EVENTS))
        times["(retried failures)"] = float(_retried(history, retryable))
        samples.append(times)
    return samples


def _what_happened(
    sb: Any, config: Config, items: Sequence[tuple[str, bytes]], names: Mapping[str, str], t0: float
) -> dict[str, Any]:
    """Runs, executions, invocations and failures of the timed window (read after it, untimed)."""
    outputs = sb.outputs
    sfn, machine = sb.client("stepfunctions"), outputs["StateMachineArn"]
    invocations = sb.runtime.invocations
    executions = [
        e
        for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=machine)
        for e in page["executions"]
        if not e["name"].startswith(_WARMUP_EXECUTION_PREFIX)
    ]
    runs = [
        item
        for page in sb.client("dynamodb").get_paginator("scan").paginate(TableName=outputs["TrackingTableName"])
        for item in page["Items"]
        if item["started_at"]["S"] != "#head" and item["job_id"]["S"] != WARMUP_KEY
    ]
    ends = [e for e in (_epoch(x.get("stopDate")) for x in executions) if e]
    starts = sorted(_epoch(x["startDate"]) or 0 for x in executions)
    durations = sorted((_epoch(x["stopDate"]) or 0) - (_epoch(x["startDate"]) or 0) for x in executions if x.get("stopDate"))
    span = (max(ends) - starts[0]) if ends and starts else 0.0
    definition_text = sfn.describe_state_machine(stateMachineArn=machine)["definition"]
    definition = json.loads(definition_text)
    retryable = retry_errors(definition)
    failed = [e for e in executions if e["status"] != "SUCCEEDED"][:5]
    return {
        "failed_executions": [_failure_detail(sfn, e, retryable) for e in failed],
        "error_samples": [
            {"function": names.get(r.function_name, r.function_name), "error_type": r.error_type, "message": _error_message(r.payload)}
            for r in invocations
            if r.errored
        ][:8],
        "files": len(items),
        "jobs_expected": expected_jobs([k for k, _ in items], config.folder_depth),
        "runs": len(runs),
        "run_statuses": dict(Counter(item.get("status", {}).get("S", "?") for item in runs)),
        "executions": len(executions),
        "execution_statuses": dict(Counter(e["status"] for e in executions)),
        "work_s": max([*ends, *(r.started_at + r.duration_ms / 1000 for r in invocations)], default=t0) - t0,
        "first_execution_start_s": (starts[0] - t0) if starts else None,
        "execution_median_s": statistics.median(durations) if durations else None,
        "execution_p90_s": durations[int(0.9 * (len(durations) - 1))] if durations else None,
        "execution_occupancy": (sum(durations) / span) if span > 0 else None,
        "functions": _function_stats(invocations, names),
        "state_times": _state_time_samples(sfn, executions, retryable),
        "top_level_states": sorted(definition.get("States", {})),
        "asl_parse_ms": asl_parse_ms(definition_text, repeats=3),
        "settings": _function_settings(sb),
    }


# --------------------------------------------------------------------------- orchestration


def machine_facts() -> dict[str, Any]:
    def version(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "?"

    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    memory_gb = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        memory_gb = round(int(Path("/proc/meminfo").read_text().split()[1]) / 1024 / 1024, 1)
    return {
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gb": memory_gb,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "moto": version("moto"),
        "boto3": version("boto3"),
        "botocore": version("botocore"),
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e", description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=None, help="files per run (default 100; --quick 30)")
    parser.add_argument(
        "--files-per-folder", "--jobs-per-folder", dest="files_per_folder", type=int, default=5,
        help="files in each folder job of the folder layout (default 5)",
    )
    parser.add_argument("--root-share", type=float, default=0.2, help="share of files at the bucket root (default 0.2)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per configuration (default 3; --quick 2)")
    parser.add_argument(
        "--configs", default=None,
        help=f"comma-separated, from {', '.join(CONFIGS)} (default folders,single,synthetic; synthetic runs once)",
    )
    parser.add_argument("--time-scale", type=float, default=0.05, help="sandbox TimeScale factor (default 0.05, as tests)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds to wait for idle per run (default 150)")
    parser.add_argument("--no-warmup", action="store_true", help="upload the batch into cold functions")
    parser.add_argument("--skip-raw", action="store_true", help="skip the raw moto measurements")
    parser.add_argument("--quick", action="store_true", help="~1 minute: 30 files, folders and single twice each, smaller raw moto samples")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="report path (default docs/PERFORMANCE.md)")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results as JSON")
    parser.add_argument("--render", type=Path, default=None, metavar="JSON", help="only re-render a saved --json file to --out")
    return parser.parse_args(argv)


def measuring_args(argv: Iterable[str]) -> list[str]:
    """The arguments that shape the numbers (output-only --json and --out dropped)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--json", "--out"):
            skip = True
        elif not arg.startswith(("--json=", "--out=")):
            kept.append(arg)
    return kept


def _progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _meta(args: argparse.Namespace, files: int, repeat: int, argv: Sequence[str] | None) -> dict[str, Any]:
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python -m bench.e2e", *measuring_args(sys.argv[1:] if argv is None else argv)]),
        "files": files,
        "files_per_folder": args.files_per_folder,
        "root_share": args.root_share,
        "repeat": repeat,
        "time_scale": args.time_scale,
        "warmup": not args.no_warmup,
        "quick": args.quick,
        "load_start": _load(),
        **machine_facts(),
    }


def _config_names(args: argparse.Namespace) -> list[str]:
    chosen = args.configs or ("folders,single" if args.quick else "folders,single,synthetic")
    names = [n.strip() for n in chosen.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configuration(s): {', '.join(unknown)}; choose from {', '.join(CONFIGS)}")
    return names


def _run_config(
    name: str, items: Sequence[tuple[str, bytes]], counter: ApiCallCounter, meter: ThreadCpuMeter, args: argparse.Namespace,
    repeat: int, timeout: float,
) -> dict[str, Any]:
    """Every run of one configuration (synthetic once unless --repeat says otherwise)."""
    config = CONFIGS[name]
    runs_for_config = 1 if (name == "synthetic" and args.repeat is None) else repeat
    entry: dict[str, Any] = {"name": name, "description": config.description, "parameters": dict(config.parameters), "runs": []}
    for i in range(runs_for_config):
        _progress(f"{name}: run {i + 1}/{runs_for_config} ({len(items)} files)")
        run = run_once(config, items, counter, meter, time_scale=args.time_scale, timeout=timeout, warmup=not args.no_warmup)
        _progress(
            f"{name}: startup {run['startup_s']:.2f}s wall {run['wall_s']:.2f}s "
            f"{run['files_per_s']:.2f} files/s {run['jobs_per_s']:.2f} jobs/s ok={run['ok']} load={run['load_after']}"
        )
        entry["runs"].append(run)
    return entry


def main(argv: Sequence[str] | None = None) -> int:
    from bench.report import SECTION, render
    from bench.sections import write_section

    counter = ApiCallCounter().install()  # first: before any botocore session exists
    meter = ThreadCpuMeter().install()
    args = parse_args(argv)
    if args.render:
        write_section(args.out, SECTION, render(json.loads(args.render.read_text())))
        _progress(f"rendered {args.render} into the {SECTION} section of {args.out}")
        return 0
    files = args.files or (30 if args.quick else 100)
    repeat = args.repeat or (2 if args.quick else 3)
    timeout = args.timeout or (90.0 if args.quick else 150.0)
    names = _config_names(args)
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ.setdefault(name, value)
    os.environ.pop("AWS_ENDPOINT_URL", None)

    began = time.perf_counter()
    results: dict[str, Any] = {"meta": _meta(args, files, repeat, argv), "configs": [], "raw_moto": []}
    if not args.skip_raw:
        _progress("raw moto throughput")
        from bench import raw_moto

        results["raw_moto"] = raw_moto.run(repeats=3, scale=0.4 if args.quick else 0.75)
    items = workload(files, args.files_per_folder, args.root_share)
    results["meta"]["bytes_median"] = statistics.median(len(body) for _, body in items)
    results["configs"] = [_run_config(name, items, counter, meter, args, repeat, timeout) for name in names]
    results["meta"]["load_end"] = _load()
    results["meta"]["duration_s"] = time.perf_counter() - began
    counter.uninstall()
    meter.uninstall()
    write_section(args.out, SECTION, render(results))
    _progress(f"wrote the {SECTION} section of {args.out} in {results['meta']['duration_s']:.0f}s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
