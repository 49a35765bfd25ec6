"""`pipeops demo`: the reference pipeline end to end on an in-process sandbox, then an incident.

Act 1 uploads the sample dataset once per redaction mode, follows every file until its run is
terminal, then checks the invariants of docs/ARCHITECTURE.md#how-it-is-checked: no file lost, the semaphore back to zero
with no holder, running executions never above the max, nothing in the DLQ.

Act 2 breaks the last sandbox by hand, as production breaks: a slot leaked by a router that died
between taking it and starting its execution, and a poison message on the main queue. It then
shows what an on-call person sees and does: the alarms that fire, `pipeops reconcile` naming the
leak, the repair, the DLQ's runbook carried out (a dry run, then the apply that parks the poison message in
the quarantine queue), and the alarms back to OK. The sandbox runs at a time scale
of 0.005 (a real second is 200 virtual ones), so a 5-minute alarm period passes in 1.5 s; its
scheduled reconciler reports only (`ReconcileApply=false`), so the leak waits for a person.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from alarms.cloudformation import COMPOSITE
from alarms.live import spec_of
from alarms.slo_alarms import window_alarm_ids
from pipeline.jobs import job_id_for_key
from pipeline.status import FileOutcome, JobStatus
from pipeline.stores.executions import ExecutionsStore
from pipeline.stores.semaphore import AcquireResult, Semaphore
from pipeline.stores.tracking import RunRecord, TrackingStore
from pipeops.views import file_outcomes, run_summary, status
from runbooks.automation.dead_letters import MALFORMED
from runbooks.automation.redrive_plan import RedriveAction
from stack.resources import StackResources

if TYPE_CHECKING:
    from sandbox.sandbox import Sandbox

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
    status: dict[str, Any]  # what `pipeops status --json` says once the pipeline is idle
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
    """The invariants (docs/ARCHITECTURE.md#how-it-is-checked), as readable violations (empty when all hold)."""
    violations = [f"file never reached a terminal outcome: {key}" for key, o in result.outcomes.items() if not o]
    violations += [
        f"file reported redacted but no output copy exists: {key}"
        for key, outcome in result.outcomes.items()
        if outcome == FileOutcome.REDACTED and key not in output_keys
    ]
    status = result.status
    if status["active_count"] != 0 or status["holders"]:
        violations.append(f"semaphore not back to zero: active_count {status['active_count']}, holders {len(status['holders'])}")
    if status["running_executions"] != 0:
        violations.append(f"{status['running_executions']} execution(s) still running after the pipeline went idle")
    if result.peak_running > result.max_concurrency:
        violations.append(f"running executions peaked at {result.peak_running} > max {result.max_concurrency}")
    if result.peak_active > result.max_concurrency:
        violations.append(f"active_count peaked at {result.peak_active} > max {result.max_concurrency}")
    if status["dead_letter_depth"]:
        violations.append(f"{status['dead_letter_depth']} message(s) in the DLQ")
    return violations


# -- the sandbox both acts run on ----------------------------------------------------------------

# A real second is 200 virtual ones: alarms written for AWS (5-minute periods, 3 of them) decide
# within seconds, and a failed message's visibility timeout (365 s) lasts 2 s.
TIME_SCALE = 0.005
# Waits given in real seconds (explicit values are not scaled): the scaled defaults would round to
# 0 s, and a folder's files would not settle into one run, nor a capacity wait wait at all.
DEMO_PARAMETERS = {"FolderSettleSeconds": "2", "CapacityRetrySeconds": "2", "ReconcileApply": "false"}


@contextmanager
def demo_sandbox(mode: str, max_concurrency: int = 3, time_scale: float = TIME_SCALE) -> Iterator[Sandbox]:
    from pipeops.pipeline_sandbox import pipeline_sandbox
    from sandbox.clock import TimeScale

    parameters = {"RedactionMode": mode, "MaxConcurrentWorkflows": str(max_concurrency), **DEMO_PARAMETERS}
    with pipeline_sandbox(parameters=parameters, time_scale=TimeScale(time_scale)) as sandbox:
        yield sandbox


def resources_of(sandbox: Sandbox) -> StackResources:
    return StackResources.from_outputs(sandbox.stack_name, dict(sandbox.outputs))


# -- act 1 ------------------------------------------------------------------------------------


def run_mode(
    sandbox: Sandbox,
    mode: str,
    files: dict[str, Path],
    progress: Callable[[str, int, int], None],
    timeout: float = 110.0,
) -> ModeResult:
    depth = 1
    resources = resources_of(sandbox)
    dynamodb, s3 = sandbox.client("dynamodb"), sandbox.client("s3")
    store = TrackingStore(resources.TrackingTableName, dynamodb)
    semaphore = Semaphore(resources.CoordinationTableName, dynamodb)
    executions = ExecutionsStore(sandbox.client("stepfunctions"), resources.StateMachineArn)

    def peaks() -> tuple[int, int]:
        return sum(1 for _ in executions.running()), semaphore.read().active_count

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
    shown = status(resources, sandbox.client).to_dict()
    listing = s3.get_paginator("list_objects_v2").paginate(Bucket=resources.OutputBucketName)
    output_keys = {obj["Key"] for page in listing for obj in page.get("Contents", [])}
    result = ModeResult(
        mode=mode,
        files=len(keys),
        seconds=round(seconds, 2),
        runs=[run_summary(r) for job in job_ids for r in runs_by_job[job]],
        outcomes=outcomes,
        status=shown,
        peak_running=sampler.peak_running,
        peak_active=sampler.peak_active,
        max_concurrency=shown["max_concurrency"],
        violations=[],
    )
    result.violations = check_invariants(result, output_keys)
    return result


# -- act 2: the incident ----------------------------------------------------------------------

GHOST = "ghost-of-a-crashed-router"  # an execution name no router will ever start
GHOST_AGE = timedelta(minutes=10)  # past the reconciler's grace (the router's timeout + 60 s)
POISON_BODY = json.dumps({"hello": "this is not a job message"})
COMPOSITE_ALARM = COMPOSITE.removesuffix("Alarm")
LEAK_ALARM = "CounterDrift"  # a count above what runs, in every reconcile for 3 periods
POISON_ALARM = "DlqNotEmpty"  # the main queue's DLQ
PAGED_BY = (COMPOSITE_ALARM, LEAK_ALARM, POISON_ALARM)


@dataclass(frozen=True)
class AlarmLine:
    """One alarm as `pipeops alarms list` shows it, with its runbook's first step."""

    name: str  # without the `<stack>-` prefix
    state: str
    reason: str
    runbook: str
    first_step: str


@dataclass
class IncidentResult:
    ghost: str
    ghost_acquired_at: str
    poison_message_id: str
    time_scale: float
    not_ok_before: list[AlarmLine]
    paged_after: float | None  # real seconds from the breakage until every PAGED_BY alarm was in ALARM
    firing: list[AlarmLine]  # every alarm not OK at that moment
    ok_when_paged: int
    router_error: dict[str, Any] | None  # the router's ERROR line for the poison message
    dry_run: dict[str, Any]
    repair: dict[str, Any]
    dlq_depth: int
    dlq_runbook: AlarmLine | None
    redrive_dry_run: dict[str, Any]  # `pipeops runbook run dlq-messages` (RunbookResult.to_dict())
    redrive: dict[str, Any]  # the same with --apply --yes
    quarantined: list[str]  # the reasons the redrive parked messages with (read, then dropped)
    recovered_after: float | None  # real seconds from the repair until every alarm the incident fired was OK
    recovered: list[str]  # the alarms the incident fired, back to OK
    not_ok_after: list[AlarmLine]
    final_active_count: int
    final_holders: list[str]
    final_dlq_depth: int
    seconds: float
    violations: list[str] = field(default_factory=list)


def alarm_lines(cloudwatch: Any, stack_name: str) -> list[AlarmLine]:
    """Every alarm of the stack, ALARM first then by name (the order of `pipeops alarms list`)."""
    prefix = f"{stack_name}-"
    lines: list[AlarmLine] = []
    pages = cloudwatch.get_paginator("describe_alarms").paginate(
        AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm", "CompositeAlarm"]
    )
    for page in pages:
        for alarm in page.get("MetricAlarms", []) + page.get("CompositeAlarms", []):
            spec = spec_of(alarm["AlarmName"], stack_name)
            lines.append(
                AlarmLine(
                    name=alarm["AlarmName"].removeprefix(prefix),
                    state=alarm["StateValue"],
                    reason=alarm.get("StateReason", ""),
                    runbook=spec.runbook.value if spec else "",
                    first_step=spec.first_step if spec else "",
                )
            )
    order = {"ALARM": 0, "INSUFFICIENT_DATA": 1, "OK": 2}
    return sorted(lines, key=lambda line: (order.get(line.state, 3), line.name))


def in_alarm(lines: Sequence[AlarmLine]) -> tuple[list[str], list[str]]:
    """(alarms in ALARM that notify, burn-rate windows in ALARM). A window alone notifies no one:
    its pair's composite does, and a long window stays in ALARM for its length after files missed."""
    windows = window_alarm_ids()
    alarming = [line.name for line in lines if line.state == "ALARM"]
    return [name for name in alarming if name not in windows], [name for name in alarming if name in windows]


def windows_sentence(windows: Sequence[str]) -> str:
    """The burn windows in ALARM, said as what they are ("" when none)."""
    if not windows:
        return ""
    return (
        f" Burn-rate windows over their threshold, which notify no one alone: {', '.join(windows)} (files that"
        " could not be redacted count as missed for the on-time objective)."
    )


def not_ok(lines: Sequence[AlarmLine]) -> list[AlarmLine]:
    return [line for line in lines if line.state != "OK"]


def all_in(lines: Sequence[AlarmLine], names: Sequence[str], state: str) -> bool:
    states = {line.name: line.state for line in lines}
    return all(states.get(name) == state for name in names)


def _wait_for(
    look: Callable[[], list[AlarmLine]], done: Callable[[list[AlarmLine]], bool], deadline: float
) -> tuple[list[AlarmLine], bool]:
    lines = look()
    while not done(lines) and time.monotonic() < deadline:
        time.sleep(0.25)
        lines = look()
    return lines, done(lines)


def _queue_depth(sqs: Any, url: str) -> int:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes.get(name, "0")) for name in names)


def router_error_line(logs: Any, function_name: str, message_id: str) -> dict[str, Any] | None:
    """The router's ERROR log line for one message (its fields: reason, error type, message)."""
    pages = logs.get_paginator("filter_log_events").paginate(
        logGroupName=f"/aws/lambda/{function_name}", filterPattern=json.dumps(message_id)
    )
    for page in pages:
        for event in page.get("events", []):
            try:
                record = json.loads(event["message"])
            except (json.JSONDecodeError, TypeError):
                continue
            if isinstance(record, dict) and record.get("level") == "ERROR" and record.get("message_id") == message_id:
                return record
    return None


def run_incident(
    sandbox: Sandbox, status: Callable[[str], None], max_slots: int, timeout: float = 60.0
) -> IncidentResult:
    """Leak a slot and poison the main queue, then do what the on-call person does, step by step."""
    resources = resources_of(sandbox)
    sqs, logs = sandbox.client("sqs"), sandbox.client("logs")
    semaphore = Semaphore(resources.CoordinationTableName, sandbox.client("dynamodb"))
    cloudwatch = sandbox.client("cloudwatch")
    look = lambda: alarm_lines(cloudwatch, sandbox.stack_name)  # noqa: E731
    violations: list[str] = []
    before = not_ok(look())

    status("breaking the sandbox by hand")
    started = time.monotonic()
    acquired_at = (datetime.now(UTC) - GHOST_AGE).isoformat(timespec="seconds")
    if semaphore.acquire(GHOST, acquired_at, max_slots) is not AcquireResult.ACQUIRED:
        violations.append(f"could not leak a slot: every one of the {max_slots} slots is taken")
    message_id = sqs.send_message(QueueUrl=resources.MainQueueUrl, MessageBody=POISON_BODY)["MessageId"]

    status("waiting for the page (the poison message fails 5 times before the DLQ)")
    at_page, paged_after = _wait_for_page(look, started, timeout, violations)
    router_error = router_error_line(logs, resources.RouterFunctionName, message_id)

    status("pipeops reconcile (dry run), then --apply")
    dry_run, repair = _reconcile_the_leak(resources, sandbox.client, violations)
    dlq_depth = _queue_depth(sqs, resources.DeadLetterQueueUrl)
    dlq_runbook = next((line for line in at_page if line.name == POISON_ALARM), None)
    status("pipeops runbook run dlq-messages (dry run), then --apply --yes")
    redrive_dry_run, redrive = _redrive_the_dlq(sandbox, resources, violations)
    quarantined = _drop_quarantined(sqs, resources.QuarantineQueueUrl)

    status("waiting for the alarms to return to OK")
    lines, recovered, recovered_after = _wait_for_ok(look, before, at_page, timeout, violations)
    final = semaphore.read()
    final_dlq = _queue_depth(sqs, resources.DeadLetterQueueUrl)
    if final.active_count or final.holders:
        violations.append(f"semaphore after the repair: active_count {final.active_count}, holders {sorted(final.holders)}")
    if final_dlq:
        violations.append(f"{final_dlq} message(s) left in the DLQ")
    return IncidentResult(
        ghost=GHOST,
        ghost_acquired_at=acquired_at,
        poison_message_id=message_id,
        time_scale=sandbox.time_scale.factor,
        not_ok_before=before,
        paged_after=paged_after,
        firing=not_ok(at_page),
        ok_when_paged=len(at_page) - len(not_ok(at_page)),
        router_error=router_error,
        dry_run=dry_run,
        repair=repair,
        dlq_depth=dlq_depth,
        dlq_runbook=dlq_runbook,
        redrive_dry_run=redrive_dry_run,
        redrive=redrive,
        quarantined=quarantined,
        recovered_after=recovered_after,
        recovered=recovered,
        not_ok_after=not_ok(lines),
        final_active_count=final.active_count,
        final_holders=sorted(final.holders),
        final_dlq_depth=final_dlq,
        seconds=time.monotonic() - started,
        violations=violations,
    )


def _wait_for_page(
    look: Callable[[], list[AlarmLine]], started: float, timeout: float, violations: list[str]
) -> tuple[list[AlarmLine], float | None]:
    """The alarms once every one that should page is in ALARM, and how long that took (None: never)."""
    lines, paged = _wait_for(look, lambda ls: all_in(ls, PAGED_BY, "ALARM"), started + timeout)
    if not paged:
        missing = [name for name in PAGED_BY if name not in {line.name for line in lines if line.state == "ALARM"}]
        violations.append(f"not in ALARM after {timeout:.0f} s: {', '.join(missing)}")
    return lines, time.monotonic() - started if paged else None


def _reconcile_the_leak(
    resources: StackResources, client: Callable[[str], Any], violations: list[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`pipeops reconcile`, then `--apply`: the dry run must name the leaked slot, the repair release it."""
    from pipeops import reconcile as reconcile_command

    dry_run = reconcile_command.run(resources, client, apply=False).to_dict()
    if GHOST not in {finding["target"] for finding in dry_run["findings"]}:
        violations.append(f"the dry run did not name the leaked slot {GHOST}")
    repair = reconcile_command.run(resources, client, apply=True).to_dict()
    if not [a for a in repair["actions"] if a["target"] == GHOST and a["result"] == "applied"]:
        violations.append(f"the repair did not release {GHOST}")
    return dry_run, repair


def _redrive_the_dlq(sandbox: Sandbox, resources: StackResources, violations: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The DLQ's runbook as on call: a dry run (the poison message named, nothing changed), then
    the apply (a message that names no run is parked in the quarantine queue, never redriven)."""
    from runbooks.automation.engine import run_runbook
    from runbooks.catalog import Runbook

    dry = run_runbook(Runbook.DLQ_MESSAGES, resources, sandbox, apply=False)
    if dry.exit_code != 1 or [g["reason"] for g in dry.evidence.get("groups", [])] != [MALFORMED]:
        violations.append(f"the redrive's dry run did not name the poison message: {dry.verdict.value} {dry.error}")
    applied = run_runbook(Runbook.DLQ_MESSAGES, resources, sandbox, apply=True)
    if applied.exit_code != 0 or [a.action.kind for a in applied.actions] != [RedriveAction.QUARANTINE.value]:
        violations.append(f"the redrive did not park the poison message: {applied.verdict.value} {applied.error}")
    return dry.to_dict(), applied.to_dict()


def _drop_quarantined(sqs: Any, queue_url: str) -> list[str]:
    """What the person does next with a parked message that names no run: read its reason, then
    delete it (nothing to fix, nothing to send back). The reasons read."""
    reasons: list[str] = []
    while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]).get("Messages", []):
        for message in messages:
            reasons.append(message.get("MessageAttributes", {}).get("pipeops-reason", {}).get("StringValue", "?"))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return reasons


def _wait_for_ok(
    look: Callable[[], list[AlarmLine]],
    before: list[AlarmLine],
    at_page: list[AlarmLine],
    timeout: float,
    violations: list[str],
) -> tuple[list[AlarmLine], list[str], float | None]:
    """The alarms once the paging ones are OK and nothing new is in ALARM: the lines, the alarms
    that fired and recovered, and how long after the repair (None: not within the wait)."""
    repaired = time.monotonic()
    already = {line.name for line in before if line.state == "ALARM"}
    fired = {line.name for line in at_page + look() if line.state == "ALARM"} - already

    def calm(lines: list[AlarmLine]) -> bool:
        return all_in(lines, PAGED_BY, "OK") and not {line.name for line in lines if line.state == "ALARM"} - already

    lines, recovered = _wait_for(look, calm, repaired + timeout)
    if not recovered:
        still = [line.name for line in lines if line.state == "ALARM" and line.name not in already]
        violations.append(f"still in ALARM {timeout:.0f} s after the repair: {', '.join(still)}")
        return lines, [], None
    return lines, sorted(fired), time.monotonic() - repaired


# -- the two acts, printed as an on-call person reads them ---------------------------------------


def run_demo(files: dict[str, Path], console: Any, *, as_json: bool = False) -> int:
    """Both acts; prints them (or one JSON envelope) and returns the exit code: 1 if anything failed."""
    from contextlib import ExitStack

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from pipeops import render

    results: list[ModeResult] = []
    with ExitStack() as stack:
        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, disable=as_json, transient=False,
        ) as progress:
            tasks = {mode: progress.add_task(f"{mode}: files accounted for", total=len(files)) for mode in MODES}

            def update(mode: str, done: int, _total: int) -> None:
                progress.update(tasks[mode], completed=done)

            for mode in MODES[:-1]:
                with demo_sandbox(mode) as sandbox:
                    results.append(run_mode(sandbox, mode, files, update))
            last = stack.enter_context(demo_sandbox(MODES[-1]))  # act 2 breaks this one
            results.append(run_mode(last, MODES[-1], files, update))
        if not as_json:
            print_act_one(console, results)
        with console.status("act 2", spinner="dots") if not as_json else _quiet() as shown:
            say = (lambda text: shown.update(f"act 2: {text}")) if shown is not None else (lambda _text: None)
            incident = run_incident(last, say, results[-1].max_concurrency)
    violations = [f"{r.mode}: {v}" for r in results for v in r.violations] + [f"incident: {v}" for v in incident.violations]
    if as_json:
        modes = [r.__dict__ for r in results]
        render.emit_json("demo", {"modes": modes, "incident": asdict(incident), "violations": violations})
    else:
        print_act_two(console, incident, results[-1].mode)
        if violations:
            console.print("[red]the demo did not go as it should:[/red]\n" + "\n".join(violations))
    return 1 if violations else 0


@contextmanager
def _quiet() -> Iterator[None]:
    yield None


def print_act_one(console: Any, results: Sequence[ModeResult]) -> None:
    from pipeops import render

    for result in results:
        console.print(render.runs_table(f"{result.mode} mode: {result.files} files in {result.seconds:.1f} s", result.runs))
        console.print(render.status_table(result.status))
        console.print(
            f"peak running executions {result.peak_running}, peak active_count {result.peak_active} "
            f"(max {result.max_concurrency})"
        )
    if any(r.violations for r in results):
        console.print("[red]invariants violated[/red] (listed at the end)")
    else:
        console.print(
            "[green]all invariants hold:[/green] every file reached a terminal outcome, the semaphore is "
            "back to zero, running executions never exceeded the max, the DLQ is empty"
        )


def _virtual(seconds: float, time_scale: float) -> str:
    return f"{seconds / time_scale / 60:.0f} virtual minutes"


def _alarms_table(title: str, lines: Sequence[AlarmLine]) -> Any:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title)
    for column in ("alarm", "state", "runbook", "first step"):
        table.add_column(column, overflow="fold")
    for line in lines:
        colour = "red" if line.state == "ALARM" else "yellow"
        table.add_row(line.name, f"[{colour}]{line.state}[/{colour}]", line.runbook or "-", escape(line.first_step) or "-")
    return table


def others_summary(lines: Sequence[AlarmLine], ok: int) -> str:
    """The alarms a table leaves out: those without data yet, by name, and the OK ones as a count."""
    waiting = [line.name for line in lines if line.state == "INSUFFICIENT_DATA"]
    parts = [f"{ok} other alarm(s) OK"]
    if waiting:
        parts.append(f"{len(waiting)} with no data yet (INSUFFICIENT_DATA: {', '.join(waiting)})")
    return "; ".join(parts)


def print_act_two(console: Any, incident: IncidentResult, mode: str) -> None:
    from rich.rule import Rule

    console.print(Rule(f"Act 2: an incident on the {mode}-mode sandbox, as the on-call person sees it"))
    _print_breakage(console, incident)
    _print_page(console, incident)
    _print_repair(console, incident)
    _print_recovery(console, incident)


def _print_breakage(console: Any, incident: IncidentResult) -> None:
    from rich.markup import escape

    scale = incident.time_scale
    console.print("[bold]Broken by hand[/bold] (the demo does this; production does it by accident):")
    console.print(
        f"  - a leaked slot: holder {incident.ghost}, taken {GHOST_AGE.seconds // 60} min ago by a router that died "
        "before starting its execution (Semaphore.acquire for an execution that never starts)"
    )
    console.print(f"  - a poison message on the main queue: {escape(POISON_BODY)}")
    console.print()
    console.print(
        f"This stack's scheduled reconciler reports only (ReconcileApply=false), so the leak waits for you; with the "
        f"default it would release the slot on its next run. Time scale {scale:g}: a real second is "
        f"{1 / scale:.0f} virtual seconds."
    )
    console.print()
    alarming, windows = in_alarm(incident.not_ok_before)
    console.print(f"Before: {'in ALARM: ' + ', '.join(alarming) if alarming else 'no alarm in ALARM'}.{windows_sentence(windows)}")
    console.print()


def _print_page(console: Any, incident: IncidentResult) -> None:
    from rich.markup import escape

    if incident.paged_after is None:
        console.print("[red]No page[/red]: the alarms below did not all reach ALARM.")
    else:
        console.print(
            f"[bold red]Paged[/bold red] {incident.paged_after:.1f} s after the breakage "
            f"({_virtual(incident.paged_after, incident.time_scale)}): {COMPOSITE_ALARM} is in ALARM."
        )
    firing = [line for line in incident.firing if line.state == "ALARM"]
    console.print(_alarms_table("Alarms in ALARM (pipeops alarms list)", firing))
    console.print(others_summary(incident.firing, incident.ok_when_paged))
    console.print()
    error = incident.router_error
    if error:
        console.print(
            f"The router's ERROR line for the message: reason {error.get('reason')} "
            f"({error.get('error_type')}: {escape(str(error.get('error', '')))})"
        )
        console.print()


def _print_repair(console: Any, incident: IncidentResult) -> None:
    from rich.markup import escape

    from pipeops import render

    console.print("[bold]$ pipeops reconcile[/bold]            (dry run: what drifted, and what would be done)")
    console.print(render.reconcile_table(incident.dry_run))
    console.print()
    console.print("[bold]$ pipeops reconcile --apply[/bold]    (each repair conditional on what was observed, audited)")
    console.print(render.reconcile_table(incident.repair))
    console.print()
    runbook = incident.dlq_runbook
    console.print(
        f"[bold]DLQ[/bold]: {incident.dlq_depth} message(s). Runbook "
        f"{runbook.runbook if runbook else '?'}, first step: {escape(runbook.first_step) if runbook else '?'}."
    )
    console.print()
    console.print(_redrive_paragraph(incident))
    console.print()


def _redrive_paragraph(incident: IncidentResult) -> str:
    """`pipeops runbook run dlq-messages`, dry then applied, in one paragraph (the README's sample shape)."""
    from rich.markup import escape

    dry, applied = incident.redrive_dry_run, incident.redrive
    groups = ", ".join(f"{g['count']} {g['reason']}" for g in dry.get("evidence", {}).get("groups", [])) or "none"
    plan = ", ".join(f"{a['kind']} {a['count']}" for a in dry.get("plan", [])) or "nothing"
    done = ", ".join(f"{a['kind']} {a['count']}: {a['result']}" for a in applied.get("actions", [])) or "nothing"
    remaining = (applied.get("verified") or {}).get("remaining", "?")
    reasons = "; ".join(incident.quarantined) or "none"
    return (
        f"pipeops runbook run dlq-messages (dry run): groups {escape(groups)}, plan {escape(plan)}, nothing changed, "
        f"verdict {dry.get('verdict')}. [bold]--apply --yes[/bold]: {escape(done)}; {remaining} left in the DLQ, "
        f"verdict {applied.get('verdict')}. A message that names no run is parked in the quarantine queue, never "
        f"redriven (a job message would go back to the main queue and its run start at most once). Its reason, read "
        f"from the quarantine queue: {escape(reasons)}; nothing to fix or send back, so the demo deletes it."
    )


def _print_recovery(console: Any, incident: IncidentResult) -> None:
    if incident.recovered_after is None:
        console.print("[red]Not back to OK[/red] within the wait.")
    else:
        console.print(
            f"[bold green]Back to OK[/bold green] {incident.recovered_after:.1f} s after the repair "
            f"({_virtual(incident.recovered_after, incident.time_scale)}): {', '.join(incident.recovered)}."
        )
    console.print()
    ok_after = incident.recovered_after is not None
    holders = ", ".join(incident.final_holders) or "no holder"
    alarming, windows = in_alarm(incident.not_ok_after)
    alarms_after = f"in ALARM: {', '.join(alarming)}" if alarming else "no alarm in ALARM"
    if windows:
        alarms_after += f" ({len(windows)} burn window(s) still over threshold, notifying no one)"
    console.print(
        f"{'[green]incident closed:[/green]' if ok_after and not incident.violations else '[red]incident open:[/red]'} "
        f"active_count {incident.final_active_count}, {holders}, DLQ depth {incident.final_dlq_depth}, "
        f"{alarms_after}; act 2 took {incident.seconds:.1f} s"
    )
