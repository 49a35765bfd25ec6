"""The runbooks besides the DLQ redrives, by id: one runner each, called by `engine.run_runbook`.

A runner takes one `RemedyRequest` (the stack, the clients, dry run or apply, the operator's
selection and options) and answers a `RunbookResult`; it never raises for an AWS error (the
verdict is `error`). Acting: the reconciler's four (`counter-drift`, `slots-full-idle`,
`backlog-stalled`, `implausible-drift`) and the re-runs (`executions-failed`,
`file-failure-rate`); diagnosing only: the throttles (`execution-throttled`,
`function-throttles`, `dynamodb-throttles`).
"""

from __future__ import annotations

from collections.abc import Callable

from botocore.exceptions import BotoCoreError, ClientError

from runbooks.automation import reconciler_runbooks, reruns, throttles
from runbooks.automation.remedy_request import RemedyRequest
from runbooks.automation.result import RunbookResult, Verdict
from runbooks.catalog import Runbook

Remedy = Callable[[RemedyRequest], RunbookResult]


REMEDIES: dict[Runbook, Remedy] = {
    Runbook.COUNTER_DRIFT: reconciler_runbooks.run,
    Runbook.SLOTS_FULL_IDLE: reconciler_runbooks.run,
    Runbook.BACKLOG_STALLED: reconciler_runbooks.run,
    Runbook.IMPLAUSIBLE_DRIFT: reconciler_runbooks.run,
    Runbook.EXECUTIONS_FAILED: reruns.run,
    Runbook.FILE_FAILURE_RATE: reruns.run,
    Runbook.EXECUTION_THROTTLED: throttles.run,
    Runbook.FUNCTION_THROTTLES: throttles.run,
    Runbook.DYNAMODB_THROTTLES: throttles.run,
}

RECONCILER: frozenset[Runbook] = frozenset(runbook for runbook, runner in REMEDIES.items() if runner is reconciler_runbooks.run)
RERUNS: frozenset[Runbook] = frozenset(runbook for runbook, runner in REMEDIES.items() if runner is reruns.run)
# Runners that only diagnose: `apply` changes nothing.
DIAGNOSE_ONLY: frozenset[Runbook] = frozenset(runbook for runbook, runner in REMEDIES.items() if runner is throttles.run)


def run_remedy(request: RemedyRequest) -> RunbookResult | None:
    """The runbook's result, or None when it has no runner here (the engine's redrives, or none)."""
    runner = REMEDIES.get(request.runbook)
    if runner is None:
        return None
    try:
        return runner(request)
    except (ClientError, BotoCoreError, LookupError, ValueError) as exc:  # reported, never a traceback
        code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""
        detail = code or type(exc).__name__
        return RunbookResult(request.runbook.value, {}, [], [], Verdict.ERROR, error=f"{detail}: {str(exc)[:300]}")
