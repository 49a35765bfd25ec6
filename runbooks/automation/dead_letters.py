"""Dead letters read as data: what each message of a DLQ names and why it is there. Pure.

Three DLQs, three shapes:

- the main DLQ (`DeadLetterQueue`): job messages the router failed `maxReceiveCount` times. The
  message does not say why (the router's reason is in its log); the run's status at diagnosis
  does, as far as can be told: `unknown_run`, `malformed_message`, or `run_<status>`;
- the ingest and tracker DLQs: an event, either as EventBridge dead-letters it (the event itself,
  the error in the `ERROR_CODE` attribute) or as Lambda's OnFailure destination writes it (the
  event in `requestPayload`, the error in `responsePayload.errorType`).

Only keys, ids and error codes leave this module (a sample, a group): never a body, a file's
content or an exception message.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pipeline.jobs import execution_name_from_arn, job_id_for_key
from pipeline.routing import MalformedMessageError, UnsupportedMessageVersionError, parse_message
from pipeline.s3events import object_created
from pipeline.status import JobStatus
from runbooks.catalog import Runbook


class DlqKind(StrEnum):
    MAIN = "main"  # job messages the router failed; source: the main queue
    INGEST = "ingest"  # S3 "Object Created" events ingest never handled
    TRACKER = "tracker"  # execution status events the tracker never handled


DLQ_OF_RUNBOOK = {Runbook.DLQ_MESSAGES: DlqKind.MAIN, Runbook.INGEST_DLQ: DlqKind.INGEST, Runbook.TRACKER_DLQ: DlqKind.TRACKER}

MALFORMED = "malformed_message"
UNSUPPORTED_VERSION = "unsupported_version"
UNKNOWN_RUN = "unknown_run"
UNREADABLE_EVENT = "unreadable_event"
# Main-DLQ reasons no redrive can fix: the message names no run the router can start.
NEVER_ROUTABLE = frozenset({MALFORMED, UNSUPPORTED_VERSION, UNKNOWN_RUN})


@dataclass(frozen=True)
class DeadLetter:
    """One received DLQ message. `body` is kept to send it on and never shown; `run` groups it
    (a run `job_id@started_at`, a job id for ingest, "" when unreadable); `target` is what it
    names (the run, the object `bucket/key`, the execution name)."""

    message_id: str
    receipt_handle: str
    body: str
    reason: str
    run: str
    target: str
    attributes: Mapping[str, Any] = field(default_factory=dict)
    replay: Mapping[str, Any] | None = None  # the event to hand to its function again

    @property
    def group(self) -> str:
        return group_id(self.reason, self.run)


def group_id(reason: str, run: str) -> str:
    """A short stable id for (reason, run), for selecting groups on the command line."""
    return "g-" + hashlib.sha256(f"{reason}\0{run}".encode()).hexdigest()[:10]


def run_id(job_id: str, started_at: str) -> str:
    return f"{job_id}@{started_at}"


# -- the main DLQ ---------------------------------------------------------------------------------


def read_job_message(message: Mapping[str, Any], statuses: Mapping[str, JobStatus | None]) -> DeadLetter:
    """A main-DLQ message; `statuses` holds each run's status at diagnosis (None: no such run)."""
    body = str(message.get("Body", ""))
    try:
        job = parse_message(body)
    except UnsupportedMessageVersionError:
        return _letter(message, UNSUPPORTED_VERSION, "", "")
    except MalformedMessageError:
        return _letter(message, MALFORMED, "", "")
    run = run_id(job.job_id, job.started_at)
    status = statuses.get(run)
    reason = UNKNOWN_RUN if status is None else f"run_{status.value.lower()}"
    return _letter(message, reason, run, run)


def runs_named(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The (job_id, started_at) of every readable job message, once each, in order."""
    seen: dict[tuple[str, str], None] = {}
    for message in messages:
        try:
            job = parse_message(str(message.get("Body", "")))
        except MalformedMessageError:
            continue
        seen[(job.job_id, job.started_at)] = None
    return list(seen)


# -- the ingest and tracker DLQs ------------------------------------------------------------------


def unwrap_event(message: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str]:
    """(the original event, the error code) of an EventBridge dead letter or a Lambda OnFailure
    record; (None, unreadable_event) for anything else."""
    try:
        data = json.loads(str(message.get("Body", "")))
    except json.JSONDecodeError:
        return None, UNREADABLE_EVENT
    if not isinstance(data, dict):
        return None, UNREADABLE_EVENT
    if isinstance(data.get("requestPayload"), dict):  # Lambda's OnFailure destination
        response = data.get("responsePayload")
        error = response.get("errorType") if isinstance(response, dict) else None
        condition = (data.get("requestContext") or {}).get("condition")
        return data["requestPayload"], str(error or condition or "function_error")
    attribute = (message.get("MessageAttributes") or {}).get("ERROR_CODE") or {}
    return data, str(attribute.get("StringValue") or "undelivered")


def read_ingest_event(message: Mapping[str, Any], folder_depth: int) -> DeadLetter:
    event, error = unwrap_event(message)
    created = object_created(event) if event is not None else None
    if created is None:
        return _letter(message, error if event is None else UNREADABLE_EVENT, "", "")
    return _letter(message, error, job_id_for_key(created.key, folder_depth), f"{created.bucket}/{created.key}", event)


def read_tracker_event(message: Mapping[str, Any]) -> DeadLetter:
    event, error = unwrap_event(message)
    detail = (event or {}).get("detail") if event is not None else None
    if not isinstance(detail, dict) or not isinstance(detail.get("executionArn"), str):
        return _letter(message, error if event is None else UNREADABLE_EVENT, "", "")
    try:
        execution_input = json.loads(detail.get("input") or "{}")
    except json.JSONDecodeError:
        execution_input = {}
    job_id, started_at = execution_input.get("job_id"), execution_input.get("started_at")
    run = run_id(job_id, started_at) if isinstance(job_id, str) and isinstance(started_at, str) else ""
    return _letter(message, error, run, execution_name_from_arn(detail["executionArn"]), event)


def _letter(
    message: Mapping[str, Any], reason: str, run: str, target: str, replay: Mapping[str, Any] | None = None
) -> DeadLetter:
    return DeadLetter(
        message_id=str(message.get("MessageId", "")),
        receipt_handle=str(message.get("ReceiptHandle", "")),
        body=str(message.get("Body", "")),
        reason=reason,
        run=run,
        target=target,
        attributes=dict(message.get("MessageAttributes") or {}),
        replay=replay,
    )
