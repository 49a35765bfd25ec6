"""Names the sidecar's template and dashboard share: logical ids made of the watched resources' names."""

from __future__ import annotations

import re

RECONCILER_TIMEOUT = 120  # the sidecar reconciler's Timeout (s): its duration alarm and chart


def pascal(name: str) -> str:
    """A resource name as a logical-id fragment: `counter-pipeline_dlq.fifo` -> `CounterPipelineDlqFifo`."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name) if part)


def function_id(name: str) -> str:
    """The logical id a watched function's alarms and chart rows are named after (it declares nothing)."""
    return f"{pascal(name)}Function"
