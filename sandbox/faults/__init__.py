"""Faults as a sandbox facility: inject, clear and list what breaks, the way AWS breaks.

`specs` holds the kinds (pure data: a function failing, timing out or slowed; an API throttled or
failing for handlers; a function dying around one of its calls; EventBridge deliveries held,
duplicated, lost or late) and the share decision; `board` the per-sandbox registry the parts ask.
The hooks: the Lambda runtime (`LambdaRuntime.faults`), the event bus (`EventBus.faults`) and the
botocore seam of handlers' calls (`sandbox.seams.handler_calls`). A served sandbox exposes the
board over HTTP (`CONTROL_PATH`, `sandbox.serving`). Nothing here knows the pipeline: the named
faults of the pipeline are built on these at the pipeops layer.
"""

from __future__ import annotations

from sandbox.faults.board import FaultBoard
from sandbox.faults.specs import (
    ApiFault,
    CallCrash,
    EventFault,
    FaultSpec,
    FaultSpecError,
    FunctionFault,
    ShareCounter,
    spec_from_json,
    spec_to_json,
)

# Where a served sandbox answers for its faults: GET lists, POST {"spec": {...}} injects,
# DELETE (?name=NAME, or every fault) clears.
CONTROL_PATH = "/_sandbox/faults"

__all__ = [
    "CONTROL_PATH",
    "ApiFault",
    "CallCrash",
    "EventFault",
    "FaultBoard",
    "FaultSpec",
    "FaultSpecError",
    "FunctionFault",
    "ShareCounter",
    "spec_from_json",
    "spec_to_json",
]
