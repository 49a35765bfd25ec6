"""`pipeops failures` names the file a timed-out Lambda was working on (it logs nothing itself)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeops.cli import app
from tests.conftest import envelope

pytestmark = pytest.mark.slow


def test_failures_names_the_file_key_of_a_detect_task_that_timed_out(
    sandbox: Any, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    import pipeline.handlers.detect as detect_handler

    real_detect = detect_handler.detect_file
    slow = "scans/slow.txt"
    released = threading.Event()
    request.addfinalizer(released.set)

    def detect_slowly(event: Any, *args: Any, **kwargs: Any) -> Any:
        if event["file_key"] == slow:
            released.wait(60)  # never finishes within its 1 s timeout
            raise AssertionError("the runtime should have cut this invocation off")
        return real_detect(event, *args, **kwargs)

    monkeypatch.setattr("pipeline.handlers.detect.detect_file", detect_slowly)
    sandbox.client("lambda").update_function_configuration(FunctionName=sandbox.outputs["DetectFunctionName"], Timeout=1)
    s3 = sandbox.client("s3")
    for key in ("scans/a.txt", slow):
        s3.put_object(Bucket=sandbox.outputs["InputBucketName"], Key=key, Body=b"mail ann@corp.example\n")
    assert sandbox.wait_until_idle(180)

    result = CliRunner().invoke(app, ["failures", "--since", "1h", "--json"])
    assert result.exit_code == 0, result.output
    rows = envelope(result.output, "failures")
    detect = [row for row in rows if row["state"] == "DetectFile"]
    assert [(row["file_key"], row["error"], row["recovered"]) for row in detect] == [(slow, "Sandbox.Timedout", False)]
    assert detect[0]["attempts"] > 1  # the first attempt and its retries, one row
    assert "timed out" in detect[0]["cause"].lower()
