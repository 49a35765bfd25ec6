"""BEHAVIOUR seam: EventBridge delivers to Lambda targets, and S3 sends AWS-shaped events
(`sandbox.eventbus`).

What moto lacks: every route into a rule's targets (`put_events`, S3's EventBridge
notifications, cross-bus forwarding) ends in `Rule.send_to_targets(event, transform_input)`, which
raises NotImplementedError for a Lambda or Step Functions target, delivers to DISABLED rules and
matches a schedule rule to every event. S3's `notifications._send_event_bridge_message` sends an
event that is not AWS-shaped (raw key, `eTag`, one event id for all, to every bus).

What it adds: both calls go to the attached `EventBus` (`route_moto_rule`, `s3_notification`),
which delivers as AWS does and hands every other target back to moto's own method
(`moto_send_to_targets`). One bus per process.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

from sandbox.seams.patching import Patch, RoutedSeam

KIND = "BEHAVIOUR"


class Bus(Protocol):
    def route_moto_rule(self, rule: Any, event: Any, transform_input: bool) -> None: ...

    def s3_notification(self, account_id: str, bucket: Any, event_name: Any, key: Any) -> None: ...


def moto_send_to_targets(rule: Any, event: Any, transform_input: bool) -> Any:
    """moto's own `Rule.send_to_targets`, with the seam on or off."""
    from moto.events.models import Rule

    send = getattr(Rule.__dict__["send_to_targets"], "__wrapped__", Rule.__dict__["send_to_targets"])
    return send(rule, event, transform_input)


def _to_bus(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def send_to_targets(rule: Any, original_event: Any, transform_input: bool = True) -> None:
        bus = SEAM.current()
        if bus is None:
            return original(rule, original_event, transform_input)
        bus.route_moto_rule(rule, original_event, transform_input)
        return None

    return send_to_targets


def _s3_to_bus(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _send_event_bridge_message(account_id: str, bucket: Any, event_name: Any, key: Any) -> None:
        bus = SEAM.current()
        if bus is None:
            return original(account_id, bucket, event_name, key)
        bus.s3_notification(account_id, bucket, event_name, key)
        return None

    return _send_event_bridge_message


def _patches() -> list[Patch]:
    from moto.events.models import Rule
    from moto.s3 import notifications

    return [
        Patch(Rule, "send_to_targets", _to_bus),
        Patch(notifications, "_send_event_bridge_message", _s3_to_bus),
    ]


SEAM: RoutedSeam[Bus] = RoutedSeam(_patches, single="EventBus")
