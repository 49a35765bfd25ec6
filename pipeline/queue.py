"""Sending job messages to the main queue, with the trace context in message attributes."""

from __future__ import annotations

from typing import Any

from pipeline.jobs import JobMessage
from pipeline.telemetry.tracing import sqs_attributes_from_current

MAX_DELAY_SECONDS = 900


class JobQueue:
    def __init__(self, sqs: Any, queue_url: str) -> None:
        self._sqs = sqs
        self._url = queue_url

    def send(self, message: JobMessage, delay_seconds: int = 0) -> str:
        response = self._sqs.send_message(
            QueueUrl=self._url,
            MessageBody=message.to_json(),
            DelaySeconds=max(0, min(MAX_DELAY_SECONDS, delay_seconds)),
            MessageAttributes=sqs_attributes_from_current(),
        )
        message_id: str = response["MessageId"]
        return message_id
