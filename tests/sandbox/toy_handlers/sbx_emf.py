"""Toy handler: powertools Logger + Metrics (EMF on stdout) and a hand-written EMF document."""

import json
import time

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

logger = Logger(service="sbx-emf")  # binds sys.stdout at construction
metrics = Metrics(namespace="SbxToy", service="sbx-emf")


@metrics.log_metrics
def handler(event, context):
    logger.info("processing files", extra={"files": event["files"]})
    metrics.add_dimension(name="toy_stage", value="test")
    metrics.add_metric(name="FilesProcessed", unit=MetricUnit.Count, value=event["files"])
    print(
        json.dumps(
            {
                "_aws": {
                    "Timestamp": int(time.time() * 1000),
                    "CloudWatchMetrics": [
                        {
                            "Namespace": "SbxToy/Raw",
                            "Dimensions": [["queue"], ["queue", "stage"]],
                            "Metrics": [{"Name": "BatchLatency", "Unit": "Milliseconds"}],
                        }
                    ],
                },
                "queue": "ingest",
                "stage": "test",
                "BatchLatency": [10, 20, 30],
            }
        )
    )
    return {"ok": True}
