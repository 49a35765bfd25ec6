"""The shell of a DLQ redrive: read the DLQ (holding its messages), carry a plan out, read again.

Diagnose receives every message (up to `max_messages`) with a visibility timeout, so the messages
are held while the plan is carried out and a second redrive running at the same moment receives
others: two redrives never act on one message (a held message whose hold expires may be sent
twice; the run's deterministic execution name makes that harmless). A dry run, and every message
the plan does not touch, is given back at once (visibility 0). Each applied group is one audit
record in the coordination table's `runbook` audit stream (`pipeops runbook history`; the
reconciler's repairs keep their own); a redrive's record is also how a run whose message comes
back is recognised and quarantined.

Paced by a `Pacer`; a move task's progress is for the caller to poll (`move_progress`): nothing
here waits for SQS to finish.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pipeline.config import Settings, env_name
from pipeline.jobs import RunRef
from pipeline.status import JobStatus
from pipeline.stores.audit import AuditStore
from pipeline.stores.tracking import TrackingStore
from runbooks.automation.dead_letters import (
    DeadLetter,
    DlqKind,
    read_ingest_event,
    read_job_message,
    read_tracker_event,
    run_id,
    runs_named,
)
from runbooks.automation.pacing import Pacer
from runbooks.automation.redrive_plan import Group, RedriveAction, group_letters
from runbooks.automation.result import ActionOutcome, ActionResult, PlannedAction
from stack.resources import StackResources

HOLD_SECONDS = 300  # how long diagnosis holds the messages it read (given back sooner)
MAX_MESSAGES = 1000  # read per run; a larger DLQ is done over several runs (the verdict says "remains")
DLQ_RETENTION = timedelta(days=14)  # template.yaml MessageRetentionPeriod: older redrives cannot return
MOVE_TASK_RATE = 5  # messages a second for SQS's own move task
QUARANTINE_ATTRIBUTES = ("pipeops-reason", "pipeops-source", "pipeops-group", "pipeops-message-id")


@dataclass(frozen=True)
class DlqEndpoints:
    """Where one DLQ's redrive reads and writes."""

    kind: DlqKind
    queue_url: str
    quarantine_url: str
    source_url: str = ""  # the main queue (main DLQ only)
    function_name: str = ""  # the function that replays its events (ingest, tracker)

    @classmethod
    def of(cls, kind: DlqKind, resources: StackResources) -> DlqEndpoints:
        quarantine = resources.QuarantineQueueUrl
        if kind is DlqKind.MAIN:
            return cls(kind, resources.DeadLetterQueueUrl, quarantine, source_url=resources.MainQueueUrl)
        if kind is DlqKind.INGEST:
            return cls(kind, resources.IngestDeadLetterQueueUrl, quarantine, function_name=resources.IngestFunctionName)
        return cls(kind, resources.TrackerDeadLetterQueueUrl, quarantine, function_name=resources.WorkflowTrackerFunctionName)

    @property
    def queue_name(self) -> str:
        return self.queue_url.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Diagnosis:
    letters: tuple[DeadLetter, ...]
    groups: tuple[Group, ...]
    depth: Mapping[str, int]  # the queue's numbers before anything was received
    truncated: bool  # more messages than `max_messages`
    move_task: Mapping[str, Any]  # {"available": bool, "running": [task handles]}

    @property
    def absent(self) -> bool:
        return not self.letters and sum(self.depth.values()) == 0

    def evidence(self, endpoints: DlqEndpoints) -> dict[str, Any]:
        return {
            "queue": endpoints.queue_name,
            "kind": endpoints.kind.value,
            "depth": dict(self.depth),
            "read": len(self.letters),
            "truncated": self.truncated,
            "groups": [group.to_dict() for group in self.groups],
            "move_task": dict(self.move_task),
        }


@dataclass
class DlqRedrive:
    """Everything one DLQ's redrive reads and writes, built per run by `engine.run_runbook`."""

    endpoints: DlqEndpoints
    sqs: Any
    lambda_client: Any
    audit: AuditStore
    tracking: TrackingStore
    actor: str
    clock: Callable[[], datetime]
    pacer: Pacer
    hold_seconds: int = HOLD_SECONDS
    max_messages: int = MAX_MESSAGES

    # -- diagnose (reads; holds the messages it read) ----------------------------------------------

    def diagnose(self) -> Diagnosis:
        depth = queue_depth(self.sqs, self.endpoints.queue_url)
        messages = self._receive_all()  # even at depth 0: SQS's approximate numbers lag new messages
        letters = self._read(messages)
        redriven = self._redriven_runs() if letters and self.endpoints.kind is DlqKind.MAIN else {}
        return Diagnosis(
            letters=tuple(letters),
            groups=tuple(group_letters(letters, redriven)),
            depth=depth,
            truncated=len(messages) >= self.max_messages,
            move_task=self._move_tasks() if self.endpoints.kind is DlqKind.MAIN and letters else {},
        )

    def _receive_all(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while len(messages) < self.max_messages:
            batch = self.sqs.receive_message(
                QueueUrl=self.endpoints.queue_url,
                MaxNumberOfMessages=min(10, self.max_messages - len(messages)),
                VisibilityTimeout=self.hold_seconds,
                WaitTimeSeconds=1,  # a long poll asks every SQS host (a short one samples): only the last call waits
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not batch:
                break
            messages += batch
        return messages

    def _read(self, messages: Sequence[Mapping[str, Any]]) -> list[DeadLetter]:
        kind = self.endpoints.kind
        if kind is DlqKind.MAIN:
            statuses = self._statuses(runs_named(messages))
            return [read_job_message(m, statuses) for m in messages]
        if kind is DlqKind.INGEST:
            depth = self._folder_depth() if messages else 1
            return [read_ingest_event(m, depth) for m in messages]
        return [read_tracker_event(m) for m in messages]

    def _statuses(self, runs: Sequence[tuple[str, str]]) -> dict[str, JobStatus | None]:
        records = {run_id(*run): self.tracking.get_run(RunRef(*run)) for run in runs}
        return {run: (record.status if record is not None else None) for run, record in records.items()}

    def _folder_depth(self) -> int:
        """Ingest's JobFolderDepth, from its environment (the grouping follows the deployed value)."""
        default = Settings().job_folder_depth
        if not self.endpoints.function_name:
            return default
        configuration = self.lambda_client.get_function_configuration(FunctionName=self.endpoints.function_name)
        value = (configuration.get("Environment") or {}).get("Variables", {}).get(env_name(Settings, "job_folder_depth"))
        return int(value) if value and str(value).isdigit() else default

    def _redriven_runs(self) -> dict[str, str]:
        """Run -> when it was last redriven, from the runbook audit trail (the DLQ's retention back)."""
        history = self.audit.history(self.clock() - DLQ_RETENTION, limit=MAX_MESSAGES, scan_without_index=False)
        redriven: dict[str, str] = {}
        for record in history.records:  # newest first
            if record.action == RedriveAction.REDRIVE.value:
                redriven.setdefault(record.target, record.at)
        return redriven

    def _move_tasks(self) -> dict[str, Any]:
        """Whether SQS's message move task exists here (it does not in moto), and any running."""
        try:
            tasks = self.sqs.list_message_move_tasks(SourceArn=queue_arn(self.sqs, self.endpoints.queue_url), MaxResults=10)
        except Exception as exc:
            if unsupported(exc):
                return {"available": False, "running": []}
            raise
        running = [t.get("TaskHandle", "") for t in tasks.get("Results", []) if t.get("Status") == "RUNNING"]
        return {"available": True, "running": running}

    def release(self, letters: Sequence[DeadLetter]) -> None:
        """Give held messages back now (visibility 0), ten per call."""
        for start in range(0, len(letters), 10):
            entries = [
                {"Id": str(i), "ReceiptHandle": letter.receipt_handle, "VisibilityTimeout": 0}
                for i, letter in enumerate(letters[start : start + 10])
            ]
            self.sqs.change_message_visibility_batch(QueueUrl=self.endpoints.queue_url, Entries=entries)

    # -- apply ----------------------------------------------------------------------------------------

    def apply(self, diagnosis: Diagnosis, plan: Sequence[PlannedAction], *, move_task: bool) -> list[ActionOutcome]:
        planned = {action.group for action in plan}
        self.release([letter for letter in diagnosis.letters if letter.group not in planned])
        if move_task:
            return self._move_all(diagnosis, plan)
        by_group: dict[str, list[DeadLetter]] = {}
        for letter in diagnosis.letters:
            by_group.setdefault(letter.group, []).append(letter)
        return [self._apply_group(action, by_group.get(action.group, [])) for action in plan]

    def _apply_group(self, action: PlannedAction, letters: Sequence[DeadLetter]) -> ActionOutcome:
        counts = {"done": 0, "quarantined": 0, "race_lost": 0}
        errors: dict[str, int] = {}
        for letter in letters:
            self.pacer.wait()
            outcome, error = self._apply_letter(action, letter)
            counts[outcome] += 1
            if error:
                errors[error] = errors.get(error, 0) + 1
        detail: dict[str, Any] = {k: v for k, v in counts.items() if v} | ({"replay_errors": errors} if errors else {})
        if counts["done"] or counts["quarantined"]:
            self._audit(action, detail)
        if counts["race_lost"] and not (counts["done"] or counts["quarantined"]):
            return ActionOutcome(action, ActionResult.RACE_LOST, detail)
        failed = action.kind == RedriveAction.REPLAY.value and counts["quarantined"]
        return ActionOutcome(action, ActionResult.FAILED if failed else ActionResult.APPLIED, detail)

    def _apply_letter(self, action: PlannedAction, letter: DeadLetter) -> tuple[str, str]:
        """("done" | "quarantined" | "race_lost", the replay's error type or "")."""
        if action.kind == RedriveAction.QUARANTINE.value:
            self._quarantine(letter, action.reason)
            return ("quarantined" if self._delete(letter) else "race_lost"), ""
        if action.kind == RedriveAction.REDRIVE.value:
            self.sqs.send_message(
                QueueUrl=self.endpoints.source_url, MessageBody=letter.body, MessageAttributes=sendable(letter.attributes)
            )
            return ("done" if self._delete(letter) else "race_lost"), ""
        error = self._replay(letter)
        if error:
            self._quarantine(letter, f"failed again when replayed: {error}")
        return ("quarantined" if error else "done") if self._delete(letter) else "race_lost", error

    def _replay(self, letter: DeadLetter) -> str:
        """The event through its own function, synchronously: "" when it worked, else the error type."""
        if letter.replay is None:
            return "unreadable_event"
        response = self.lambda_client.invoke(
            FunctionName=self.endpoints.function_name,
            InvocationType="RequestResponse",
            Payload=json.dumps(letter.replay).encode(),
        )
        if not response.get("FunctionError"):
            return ""
        try:
            payload = json.loads(response["Payload"].read() or b"{}")
        except (json.JSONDecodeError, AttributeError):
            payload = {}
        return str(payload.get("errorType") or response["FunctionError"]) if isinstance(payload, dict) else "function_error"

    def _quarantine(self, letter: DeadLetter, reason: str) -> None:
        if not self.endpoints.quarantine_url:
            raise LookupError("the stack has no QuarantineQueue (output QuarantineQueueUrl): update the stack")
        values = (reason[:256], self.endpoints.kind.value, letter.group, letter.message_id)
        self.sqs.send_message(
            QueueUrl=self.endpoints.quarantine_url,
            MessageBody=letter.body,
            MessageAttributes={
                name: {"DataType": "String", "StringValue": value or "-"} for name, value in zip(QUARANTINE_ATTRIBUTES, values, strict=True)
            },
        )

    def _delete(self, letter: DeadLetter) -> bool:
        """False when the hold expired and the message is someone else's now (a lost race)."""
        try:
            self.sqs.delete_message(QueueUrl=self.endpoints.queue_url, ReceiptHandle=letter.receipt_handle)
        except Exception as exc:
            if error_code(exc) in ("ReceiptHandleIsInvalid", "InvalidParameterValue", "AWS.SimpleQueueService.NonExistentQueue"):
                return False
            raise
        return True

    def _move_all(self, diagnosis: Diagnosis, plan: Sequence[PlannedAction]) -> list[ActionOutcome]:
        """SQS moves the whole DLQ back to the main queue at MOVE_TASK_RATE a second."""
        self.release(diagnosis.letters)
        handle = self.sqs.start_message_move_task(
            SourceArn=queue_arn(self.sqs, self.endpoints.queue_url), MaxNumberOfMessagesPerSecond=MOVE_TASK_RATE
        )["TaskHandle"]
        detail = {"method": "move_task", "task_handle": handle}
        for action in plan:
            self._audit(action, detail | {"done": action.count})
        return [ActionOutcome(action, ActionResult.APPLIED, detail) for action in plan]

    def _audit(self, action: PlannedAction, detail: Mapping[str, Any]) -> None:
        before = {"queue": self.endpoints.queue_name, "group": action.group, "messages": action.count}
        destination = self.endpoints.quarantine_url if action.kind == RedriveAction.QUARANTINE.value else self.endpoints.source_url
        after = dict(detail) | ({"to": destination.rsplit("/", 1)[-1]} if destination else {"via": self.endpoints.function_name})
        self.audit.record(
            action=action.kind, target=action.target, reason=action.reason, before=before, after=after, by=self.actor, at=self.clock()
        )

    # -- verify ---------------------------------------------------------------------------------------

    def verify(self) -> dict[str, Any]:
        return verify_queues(self.sqs, self.endpoints)


def verify_queues(sqs: Any, endpoints: DlqEndpoints) -> dict[str, Any]:
    """The DLQ read again: what remains in it, and what the quarantine holds."""
    depth = queue_depth(sqs, endpoints.queue_url)
    quarantine = queue_depth(sqs, endpoints.quarantine_url) if endpoints.quarantine_url else {}
    return {"depth": depth, "remaining": sum(depth.values()), "quarantine_depth": sum(quarantine.values())}


# -- small SQS reads shared with the caller ---------------------------------------------------------

DEPTH_ATTRIBUTES = {
    "visible": "ApproximateNumberOfMessages",
    "in_flight": "ApproximateNumberOfMessagesNotVisible",
    "delayed": "ApproximateNumberOfMessagesDelayed",
}


def queue_depth(sqs: Any, queue_url: str) -> dict[str, int]:
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=list(DEPTH_ATTRIBUTES.values()))["Attributes"]
    return {name: int(attributes.get(attribute, 0)) for name, attribute in DEPTH_ATTRIBUTES.items()}


def queue_arn(sqs: Any, queue_url: str) -> str:
    return str(sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])


def move_progress(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """The DLQ's move tasks as SQS reports them (status, moved, to move): the caller polls this."""
    tasks = sqs.list_message_move_tasks(SourceArn=queue_arn(sqs, queue_url), MaxResults=10).get("Results", [])
    keys = ("TaskHandle", "Status", "ApproximateNumberOfMessagesMoved", "ApproximateNumberOfMessagesToMove", "FailureReason")
    return [{key: task[key] for key in keys if key in task} for task in tasks]


def follow_move_task(
    sqs: Any, queue_url: str, task_handle: str, *, sleep: Callable[[float], None], interval: float = 5.0
) -> Iterator[dict[str, Any]]:
    """The task's progress every `interval` seconds until it is no longer RUNNING (the last one
    yielded says how it ended). For a process that may wait, e.g. the CLI's progress bar; a Lambda
    polls `move_progress` once per invocation instead."""
    while True:
        task = next((t for t in move_progress(sqs, queue_url) if t.get("TaskHandle") == task_handle), {"Status": "UNKNOWN"})
        yield task
        if task.get("Status") != "RUNNING":
            return
        sleep(interval)


def sendable(attributes: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Received message attributes (the trace context) in the shape SendMessage takes."""
    kept: dict[str, dict[str, Any]] = {}
    for name, attribute in attributes.items():
        value = {k: attribute[k] for k in ("DataType", "StringValue", "BinaryValue") if attribute.get(k) is not None}
        if "DataType" in value and len(value) == 2:
            kept[name] = value
    return kept


def error_code(exc: BaseException) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


def unsupported(exc: BaseException) -> bool:
    """An API the endpoint does not have: moto raises NotImplementedError in process, and answers a
    served request with a 5xx or an unknown-operation code."""
    if isinstance(exc, NotImplementedError):
        return True
    status = getattr(exc, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return error_code(exc) in ("InvalidAction", "UnknownOperationException", "NotImplemented") or int(status or 0) >= 500
