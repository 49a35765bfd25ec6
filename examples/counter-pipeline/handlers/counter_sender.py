"""The example pipeline's sender: one queue message per document (`{"documents": ["a.pdf", ...]}`)."""

from __future__ import annotations

import json
import os
from typing import Any

import boto3


def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    sqs = boto3.client("sqs")
    documents = [str(document) for document in event.get("documents", [])]
    for document in documents:
        sqs.send_message(QueueUrl=os.environ["QUEUE_URL"], MessageBody=json.dumps({"document": document}))
    return {"sent": len(documents)}
