"""The runbook catalog: every runbook id, its page's title, and where the page lives.

One enum holds the ids: the alarm catalog names its alarms' runbooks from it, the dashboards and
`pipeops runbook` point at it, and a test holds the pages and the alarm catalog to it in both
directions (every alarm's runbook has a page, every page names exactly the alarms that send people
to it). Incident pages are the ones no single alarm names (a stalled pipeline, a bad deploy, PII
found where it must not be, alarms that notify nobody): they carry no alarms.

Pure: nothing here imports the alarm catalog (it imports this), reads AWS or writes a file.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

PAGES_DIR = Path(__file__).resolve().parent
# Every page has these sections, in this order, after its `# <title>` line.
SECTIONS = ("Meaning", "Alarms", "Impact", "Diagnosis", "Mitigation", "Verify", "Escalate / roll back")


class Runbook(StrEnum):
    """A runbook id (the page is `runbooks/<id>.md`), with its title and whether it is an incident
    page (named by no alarm)."""

    page_title: str
    incident: bool

    def __new__(cls, value: str, page_title: str, incident: bool = False) -> Runbook:
        member = str.__new__(cls, value)
        member._value_ = value
        member.page_title = page_title
        member.incident = incident
        return member

    # Alarm pages: each named by at least one alarm of the alarm catalog.
    DLQ_MESSAGES = "dlq-messages", "Job messages in the main DLQ"
    TRACKER_DLQ = "tracker-dlq", "Execution status events in the tracker DLQ"
    INGEST_DLQ = "ingest-dlq", "Upload events in the ingest DLQ"
    COUNTER_DRIFT = "counter-drift", "The semaphore's count disagrees with what runs"
    SLOTS_FULL_IDLE = "slots-full-idle", "Every slot taken, nothing running"
    BACKLOG_STALLED = "backlog-stalled", "A run waits QUEUED and nothing moves"
    IMPLAUSIBLE_DRIFT = "implausible-drift", "The reconciler refused to release on absence"
    RECONCILER_SILENT = "reconciler-silent", "The reconciler stopped reporting"
    ROUTER_FAILURES = "router-failures", "The router fails to route messages"
    FILE_FAILURE_RATE = "file-failure-rate", "Many files of recent runs failed"
    EXECUTIONS_FAILED = "executions-failed", "Workflow executions failed or timed out"
    EXECUTION_THROTTLED = "execution-throttled", "Step Functions throttled the pipeline"
    FUNCTION_ERRORS = "function-errors", "A function keeps raising or timing out"
    FUNCTION_THROTTLES = "function-throttles", "A function is throttled"
    FUNCTION_DURATION = "function-duration", "A function runs close to its timeout"
    DYNAMODB_THROTTLES = "dynamodb-throttles", "DynamoDB throttles a table"
    SLO_BURN = "slo-burn", "Files are not done on time: the error budget burns"
    FILE_LOST = "file-lost", "A file was lost"
    # Incident pages: no single alarm names them.
    PIPELINE_STALLED = "pipeline-stalled", "Incident: the pipeline is stalled", True
    BAD_DEPLOY = "bad-deploy", "Incident: a deploy broke the pipeline", True
    PII_EXPOSURE = "pii-exposure", "Incident: PII found in a log or an output", True
    ALERT_DELIVERY = "alert-delivery", "Incident: alarms that notify nobody", True


class UnknownRunbookError(ValueError):
    """An id that is no runbook; the message names the valid ones."""


def parse(runbook_id: str) -> Runbook:
    """The runbook of `runbook_id`, or an error that lists every valid id."""
    try:
        return Runbook(runbook_id.strip().lower())  # type: ignore[call-arg]  # a lookup by value, not __new__
    except ValueError:
        valid = ", ".join(member.value for member in Runbook)
        raise UnknownRunbookError(f"no runbook {runbook_id!r}; valid ids: {valid}") from None


def page_path(runbook: Runbook) -> Path:
    """Where the page of `runbook` lives."""
    return PAGES_DIR / f"{runbook.value}.md"


def load_page(runbook: Runbook) -> str:
    """The page's Markdown."""
    return page_path(runbook).read_text(encoding="utf-8")
