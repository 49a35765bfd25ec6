"""Tracing=otlp on the sandbox: a job's spans reach the collector (the sandbox's OTLP receiver, in
place of the ADOT collector layer), one trace from ingest through the router to the workflow's tasks.

In a fresh interpreter: the tracer provider a function installs is global to the process and would
keep recording in every later test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from bench.imports import PROJECT_ROOT

_RUN = """
import json, sys
from sandbox import otlp_receiver
from sandbox.sandbox import Sandbox

sandbox = Sandbox(parameters={"Tracing": "otlp"}).start()
try:
    s3 = sandbox.client("s3")
    s3.put_object(Bucket=sandbox.outputs["InputBucketName"], Key="traced.txt", Body=b"call 415-555-0142")
    assert sandbox.wait_until_idle(120), "the sandbox did not become idle"
    spans = [span.__dict__ for span in otlp_receiver.shared().spans]
finally:
    sandbox.stop()
print(json.dumps(spans))
"""


def job_spans() -> list[dict[str, Any]]:
    completed = subprocess.run(
        [sys.executable, "-c", _RUN], capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_a_jobs_spans_reach_the_collector_as_one_trace(aws_env: None) -> None:
    spans = job_spans()
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    assert {"pipeops.ingest", "router.route", "detect.file"} <= set(by_name), sorted(by_name)
    assert {span["service"] for span in spans} == {"pipeops-pipeline"}
    [ingest] = by_name["pipeops.ingest"]
    [route] = by_name["router.route"]
    [detect] = by_name["detect.file"]
    assert route["trace_id"] == ingest["trace_id"] == detect["trace_id"], "one trace per job"
    assert route["parent_span_id"] == ingest["span_id"], "the router continues the ingest invocation"
    assert route["attributes"]["job_id"] == detect["attributes"]["job_id"] == "traced.txt"
    assert detect["attributes"]["file_key"] == "traced.txt"
