"""Toy handler: one application log line of each kind Lambda's log-level filter reads, and an
EMF document (no "level"); returns the logging variables the runtime set."""

import json
import os
import time

STAMP = "2026-12-03T09:00:00.000+00:00"


def handler(event, context):
    print(json.dumps({"level": "DEBUG", "timestamp": STAMP, "message": "debug line"}))
    print(json.dumps({"level": "INFO", "timestamp": STAMP, "message": "info line"}))
    print(json.dumps({"level": "WARNING", "timestamp": STAMP, "message": "warning line"}))
    print(json.dumps({"level": "ERROR", "timestamp": STAMP, "message": "error line"}))
    print(json.dumps({"level": "ERROR", "timestamp": "03/12/2026 09:00", "message": "badly stamped error"}))
    print("plain text line")
    metric = {
        "Namespace": "SbxLevels",
        "Dimensions": [["fn"]],
        "Metrics": [{"Name": "Ticks", "Unit": "Count"}],
    }
    print(
        json.dumps(
            {
                "_aws": {"Timestamp": int(time.time() * 1000), "CloudWatchMetrics": [metric]},
                "fn": "x",
                "Ticks": 1,
            }
        )
    )
    return {key: os.environ.get(key) for key in ("AWS_LAMBDA_LOG_FORMAT", "AWS_LAMBDA_LOG_LEVEL")}
