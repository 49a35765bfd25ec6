"""One runbook run's request, as the runners of runbooks.automation.remedies receive it."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from runbooks.catalog import Runbook
from stack.resources import StackResources


class Selection(StrEnum):
    """What an operator may pick for one run, by its name in a runbook function event and in an
    Automation document's parameters; the CLI's options are --group, --holder, --run,
    --grace-seconds. Which runbook takes which: `engine.SELECTIONS`."""

    GROUPS = "Groups"  # DLQ groups (ids from the diagnosis); none named: every group
    HOLDERS = "Holders"  # semaphore holders implausible-drift may release; none named: it refuses
    RUNS = "Runs"  # failed runs to re-run, `job_id@started_at`; none named: nothing re-run
    GRACE_SECONDS = "GraceSeconds"  # the reconciler runbooks: how old a holder must be to act on


class Clients(Protocol):
    """Anything that hands out boto3 clients: the CLI's Connection, the sandbox."""

    def client(self, service: str) -> Any: ...


def caller_arn(clients: Clients) -> str:
    """Who applies, for the audit record's `by`."""
    try:
        return str(clients.client("sts").get_caller_identity()["Arn"])
    except Exception:  # no STS answer (a sandbox without it): still audited, as unknown
        return "unknown"


@dataclass(frozen=True)
class RemedyRequest:
    """One run of one runbook. `selection` is what the operator picked (the engine's `groups`:
    holder names for `implausible-drift`, run ids `job_id@started_at` for the re-runs); `options`
    holds the named ones (`holders`, `runs`, `grace_seconds`), which win over `selection`."""

    runbook: Runbook
    resources: StackResources
    clients: Clients
    apply: bool
    actor: str
    clock: Callable[[], datetime]
    selection: Collection[str] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        return self.clients.client(service)

    def who(self) -> str:
        """Who applies, for the audit record's `by`: the given actor, else the caller's ARN."""
        return self.actor or caller_arn(self.clients)

    def chosen(self, option: str) -> tuple[str, ...]:
        """The names of `option` (e.g. `holders`), else the selection, else none; each once."""
        value = self.options.get(option)
        names = value if value is not None else (self.selection or ())
        if isinstance(names, str):
            names = [part for part in names.split(",")]
        return tuple(dict.fromkeys(str(name).strip() for name in names if str(name).strip()))
