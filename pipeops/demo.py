"""`pipeops demo`: the reference pipeline end to end on an in-process sandbox, checked.

Uploads the sample dataset once per redaction mode, follows every file until its run is
terminal, then checks the invariants of DESIGN.md §5: no file lost, the semaphore back to zero
with no holder, running executions never above the max, nothing in the DLQ.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from monitors.health import assess, observe
from pipeline.jobs import job_id_for_key
from pipeline.status import ExecutionStatus, JobStatus
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import RunRecord, TrackingStore
from pipeops.resources import StackResources
from pipeops.views import file_outcomes, run_summary

SAMPLES_DIR = Path(__file__).resolve().parent.parent / "samples"
MODES = ("blackout", "synthetic")


def sample_files(root: Path = SAMPLES_DIR) -> dict[str, Path]:
    """S3 key → local file for every file under `root` (keys relative to it, '/'-separated)."""
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


@dataclass
class PeakSampler:
    """Samples running executions and active_count on a thread: their peaks must stay ≤ max."""

    read: Callable[[], tuple[int, int]]
    interval: float = 0.05
    peak_running: int = 0
    peak_active: int = 0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> PeakSampler:
        self._thread = threading.Thread(target=self._run, name="demo-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            running, active = self.read()
            self.peak_running = max(self.peak_running, running)
            self.peak_active = max(self.peak_active, active)
            self.samples += 1


@dataclass
class ModeResult:
    mode: str
    files: int
    seconds: float
    runs: list[dict[str, Any]]
    outcomes: dict[str, str]
    health: dict[str, Any]
    findings: list[dict[str, Any]]
    peak_running: int
    peak_active: int
    max_concurrency: int
    violations: list[str]


def accounted(keys: list[str], runs_by_job: dict[str, list[RunRecord]], depth: int) -> dict[str, str]:
    """Each uploaded key → its outcome in the latest terminal run that holds it ('' if none yet)."""
    outcomes: dict[str, str] = {}
    for key in keys:
        outcome = ""
        for record in runs_by_job.get(job_id_for_key(key, depth), []):  # newest first
            if key in record.files and record.status.is_terminal:
                outcome = file_outcomes(record).get(key, "") if record.status is JobStatus.COMPLETE else (
                    f"FAILED: {record.error}"
                )
                break
        outcomes[key] = outcome
    return outcomes


def check_invariants(result: ModeResult, output_keys: set[str]) -> list[str]:
    """The DESIGN.md §5 invariants, as readable violations (empty when all hold)."""
    violations = [f"file never reached a terminal outcome: {key}" for key, o in result.outcomes.items() if not o]
    violations += [
        f"file reported redacted but no output copy exists: {key}"
        for key, outcome in result.outcomes.items()
        if outcome == "redacted" and key not in output_keys
    ]
    health = result.health
    if health["active_count"] != 0 or health["holders"]:
        violations.append(f"semaphore not back to zero: active_count {health['active_count']}, holders {len(health['holders'])}")
    if health["running_executions"] != 0:
        violations.append(f"{health['running_executions']} execution(s) still running after the pipeline went idle")
    if result.peak_running > result.max_concurrency:
        violations.append(f"running executions peaked at {result.peak_running} > max {result.max_concurrency}")
    if result.peak_active > result.max_concurrency:
        violations.append(f"active_count peaked at {result.peak_active} > max {result.max_concurrency}")
    if health["dead_letter_depth"]:
        violations.append(f"{health['dead_letter_depth']} message(s) in the DLQ")
    return violations


def run_mode(
    mode: str,
    files: dict[str, Path],
    progress: Callable[[str, int, int], None],
    timeout: float = 110.0,
    max_concurrency: int = 3,
) -> ModeResult:
    from sandbox.sandbox import Sandbox

    depth = 1
    with Sandbox(parameters={"RedactionMode": mode, "MaxConcurrentWorkflows": str(max_concurrency)}) as sandbox:
        resources = StackResources.from_outputs(sandbox.stack_name, dict(sandbox.outputs))
        dynamodb, sfn, s3 = sandbox.client("dynamodb"), sandbox.client("stepfunctions"), sandbox.client("s3")
        store = TrackingStore(resources.TrackingTableName, dynamodb)
        semaphore = Semaphore(resources.CoordinationTableName, dynamodb)

        def peaks() -> tuple[int, int]:
            running = sfn.list_executions(stateMachineArn=resources.StateMachineArn, statusFilter=ExecutionStatus.RUNNING)
            return len(running["executions"]), semaphore.read().active_count

        keys = sorted(files)
        started = time.monotonic()
        with PeakSampler(peaks) as sampler:
            for key, path in files.items():
                s3.put_object(Bucket=resources.InputBucketName, Key=key, Body=path.read_bytes())
            job_ids = sorted({job_id_for_key(k, depth) for k in keys})
            outcomes: dict[str, str] = {}
            while time.monotonic() - started < timeout:
                runs_by_job = {job: store.runs_of(job) for job in job_ids}
                outcomes = accounted(keys, runs_by_job, depth)
                done = sum(1 for o in outcomes.values() if o)
                progress(mode, done, len(keys))
                if done == len(keys):
                    break
                time.sleep(0.25)
            sandbox.wait_until_idle(timeout=max(5.0, timeout - (time.monotonic() - started)))
        seconds = time.monotonic() - started
        runs_by_job = {job: store.runs_of(job) for job in job_ids}
        outcomes = accounted(keys, runs_by_job, depth)
        snapshot = observe(resources, sandbox.client)
        listing = s3.get_paginator("list_objects_v2").paginate(Bucket=resources.OutputBucketName)
        output_keys = {obj["Key"] for page in listing for obj in page.get("Contents", [])}
        result = ModeResult(
            mode=mode,
            files=len(keys),
            seconds=round(seconds, 2),
            runs=[run_summary(r) for job in job_ids for r in runs_by_job[job]],
            outcomes=outcomes,
            health=snapshot.to_dict(),
            findings=[asdict(f) for f in assess(snapshot)],
            peak_running=sampler.peak_running,
            peak_active=sampler.peak_active,
            max_concurrency=snapshot.max_concurrency,
            violations=[],
        )
        result.violations = check_invariants(result, output_keys)
        return result
