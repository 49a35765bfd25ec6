"""The CLI: every command documented; the served sandbox reachable from other processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import boto3
import pytest
from typer.main import get_command
from typer.testing import CliRunner

from pipeops.cli import app
from tests.conftest import envelope


def all_commands(group: Any, prefix: str = "") -> dict[str, Any]:
    found = {}
    for name, command in group.commands.items():
        found[f"{prefix}{name}"] = command
        if hasattr(command, "commands"):
            found.update(all_commands(command, f"{prefix}{name} "))
    return found


def test_every_command_has_help_text_and_json_output() -> None:
    commands = all_commands(get_command(app))  # type: ignore[arg-type]
    assert {"demo", "sandbox up", "upload", "status", "jobs", "job show", "metrics", "version"} <= set(commands)
    for name, command in commands.items():
        assert (command.help or "").strip(), f"`pipeops {name}` has no help text"
        if not hasattr(command, "commands"):
            assert any("--json" in p.opts for p in command.params), f"`pipeops {name}` has no --json"


def test_a_missing_stack_is_a_clear_error_not_a_traceback(aws) -> None:
    result = CliRunner().invoke(app, ["status", "--stack-name", "nope"])
    assert result.exit_code == 2
    said = " ".join(result.output.split())  # rich wraps long lines
    assert "no stack 'nope'" in said and "pipeops sandbox up" in said


def test_status_jobs_and_job_show_read_a_sandbox(sandbox) -> None:
    s3 = sandbox.client("s3")
    s3.put_object(Bucket=sandbox.outputs["InputBucketName"], Key="claims/a.txt", Body=b"mail bo@corp.example\n")
    assert sandbox.wait_until_idle(60)
    runner = CliRunner()
    status = envelope(runner.invoke(app, ["status", "--json"]).output, "status")
    assert status["active_count"] == 0 and status["jobs_by_status"] == {"COMPLETE": 1}
    assert status["active_runs"] == {} and status["jobs_by_status_window"] == "24h"
    assert [(w["window"], w["counts"], w["lower_bounds"]) for w in status["recent_outcomes"]] == [
        ("1h", {"COMPLETE": 1, "FAILED": 0}, []),
        ("24h", {"COMPLETE": 1, "FAILED": 0}, []),
    ]
    text = " ".join(runner.invoke(app, ["status"]).output.split())  # rich wraps long lines
    assert "jobs by status │ COMPLETE 1" in text and "ended in the last 1h (since " in text
    assert "COMPLETE 1, FAILED 0" in text and "ended runs of the last 24h" in text
    runs = envelope(runner.invoke(app, ["jobs", "--status", "complete", "--json"]).output, "jobs")
    assert [r["job_id"] for r in runs] == ["claims/"]
    assert envelope(runner.invoke(app, ["jobs", "--json", "--limit", "1"]).output, "jobs") == runs
    assert "1 run(s)" in runner.invoke(app, ["jobs", "--limit", "5"]).output
    detail = envelope(runner.invoke(app, ["job", "show", "claims/", "--json"]).output, "job")
    assert detail["file_outcomes"] == {"claims/a.txt": "redacted"}
    assert detail["state_path"][0] == "MarkDetecting" and detail["state_path"][-1] == "WorkflowComplete"
    assert {line["function"] for line in detail["log_lines"]} >= {sandbox.outputs["DetectFunctionName"]}


def test_a_served_sandbox_answers_the_cli_and_plain_boto3_in_other_processes(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    server = subprocess.Popen(
        [sys.executable, "-m", "pipeops.cli", "sandbox", "up", "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = server.stdout.readline()  # type: ignore[union-attr]
        assert line, server.stderr.read()  # type: ignore[union-attr]
        info = json.loads(line)
        endpoint = info["endpoint_url"]
        assert endpoint.startswith("http://127.0.0.1:")
        client_env = env | {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
        status = subprocess.run(
            [sys.executable, "-m", "pipeops.cli", "status", "--endpoint-url", endpoint, "--json"],
            capture_output=True, text=True, env=client_env, timeout=120, check=False,
        )
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["data"]["stack"] == "pipeops"
        # A fresh laptop: no credentials anywhere. Against the sandbox that is fine...
        bare_env = env | {"HOME": str(tmp_path), "AWS_EC2_METADATA_DISABLED": "true"}
        bare = subprocess.run(
            [sys.executable, "-m", "pipeops.cli", "status", "--endpoint-url", endpoint, "--json"],
            capture_output=True, text=True, env=bare_env, timeout=120, check=False,
        )
        assert bare.returncode == 0, bare.stdout + bare.stderr
        assert json.loads(bare.stdout)["data"]["stack"] == "pipeops"
        # ...against AWS it says what is missing and how to provide it, not "no stack".
        against_aws = subprocess.run(
            [sys.executable, "-m", "pipeops.cli", "status"],
            capture_output=True, text=True, env=bare_env, timeout=120, check=False,
        )
        said = " ".join(against_aws.stdout.split())
        assert against_aws.returncode == 2 and "no AWS credentials found" in said and "AWS_PROFILE" in said
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x")
        assert info["outputs"]["InputBucketName"] in {b["Name"] for b in s3.list_buckets()["Buckets"]}
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            pytest.fail("the served sandbox did not stop on SIGTERM")
    assert server.returncode == 0
