"""BEHAVIOUR seam: CloudWatch's PutCompositeAlarm (`sandbox.alarm_engine` evaluates composites).

What moto lacks: moto 5.2 already models composite alarms (its PutMetricAlarm handler reads
`AlarmRule`, stores it on the alarm, and DescribeAlarms lists such alarms under CompositeAlarms);
only the action is missing (NotImplementedError).

What it adds: `CloudWatchResponse.put_composite_alarm`, routed to moto's PutMetricAlarm handler,
in-process and served. Installed once and left on (an alarm engine or a deployment asks for it); a
moto that implements the action itself is left untouched.
"""

from __future__ import annotations

from typing import Any

from sandbox.seams.patching import CountedPatches, Patch

KIND = "BEHAVIOUR"


def _put_composite_alarm(_absent: Any) -> Any:
    def put_composite_alarm(self: Any) -> Any:
        return type(self).put_metric_alarm(self)

    return put_composite_alarm


def _patches() -> list[Patch]:
    from moto.cloudwatch.responses import CloudWatchResponse

    return [Patch(CloudWatchResponse, "put_composite_alarm", _put_composite_alarm)]


_PATCHES = CountedPatches(_patches, marker="__pipeops_seam__")


def install() -> bool:
    """Give moto's CloudWatch the PutCompositeAlarm action (idempotent; returns True)."""
    from moto.cloudwatch.responses import CloudWatchResponse

    if not _PATCHES.installed() and getattr(CloudWatchResponse, "put_composite_alarm", None) is None:
        _PATCHES.install()
    return True
