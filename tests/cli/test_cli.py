"""The CLI: every command documented; the served sandbox reachable from other processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import boto3
import pytest
from typer.main import get_command
from typer.testing import CliRunner

from pipeops.cli import app
from tests.conftest import envelope, sandbox_up_process


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
    assert result.exit_code == 2 and result.stdout == ""
    [said] = result.stderr.splitlines()
    assert said.startswith("error: no stack 'nope'") and "pipeops sandbox up" in said


# Every input that cannot work: (environment, arguments, what the one line must say).
BAD_INPUTS = {
    "a mistyped profile": ({}, ["status", "--profile", "nope"], "no AWS profile 'nope' (from --profile)"),
    "a mistyped AWS_PROFILE": ({"AWS_PROFILE": "nope"}, ["jobs"], "no AWS profile 'nope' (from the environment variable AWS_PROFILE)"),
    "an endpoint without a scheme": ({}, ["status", "--endpoint-url", "127.0.0.1:4566"], "use e.g. http://127.0.0.1:4566"),
    "a region that is no name": ({}, ["alarms", "list", "--region", "eu west 1"], "is not a region name"),
    "a sandbox parameter that is no KEY=VALUE": ({}, ["sandbox", "up", "--parameter", "MaxConcurrentWorkflows"], "is not KEY=VALUE"),
    "a sandbox time scale past 1": ({}, ["sandbox", "up", "--time-scale", "2"], "--time-scale 2.0 is not in (0, 1]"),
    "a sandbox parameter the template refuses": (
        {}, ["sandbox", "up", "--parameter", "MaxConcurrentWorkflows=0"], "the sandbox cannot deploy template.yaml: Parameter",
    ),
    "a mistyped profile for the dashboard": (
        {}, ["dashboard", "render", "--out", "never.html", "--profile", "nope"], "no AWS profile 'nope' (from --profile)",
    ),
    "a region botocore does not know": ({}, ["status", "--region", "mars-1"], "region 'mars-1' (from --region) is not one botocore knows"),
    "a window past any date": ({}, ["failures", "--since", "99999999d"], "--since '99999999d' reaches too far back"),
    "a window that is no duration": ({}, ["failures", "--since", "yesterday"], "--since 'yesterday' is not a duration"),
    "an unknown status": ({}, ["jobs", "--status", "done"], "unknown status 'done': use one of"),
    "a missing upload": ({}, ["upload", "no/such/file.txt"], "no/such/file.txt does not exist"),
    "a stack that is not there": ({}, ["jobs", "--stack-name", "nope"], "no stack 'nope' at AWS region us-east-1"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_every_bad_input_is_one_line_that_says_what_to_fix(aws, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    environment, arguments, said = BAD_INPUTS[case]
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and said in line
    with_json = CliRunner().invoke(app, [*arguments, "--json"])
    assert with_json.exit_code == 2 and with_json.stderr == result.stderr
    error = json.loads(with_json.stdout)
    assert error == {"version": 2, "kind": "error", "data": {"message": line.removeprefix("error: "), "code": error["data"]["code"], "exit_code": 2}}
    assert error["data"]["code"] in {"bad_input", "bad_connection", "stack_not_found", "failed"}


def test_a_usage_error_with_json_is_the_error_envelope_too() -> None:
    result = CliRunner().invoke(app, ["status", "--bogus", "--json"])
    assert result.exit_code == 2 and "No such option: --bogus" in result.stderr
    assert json.loads(result.stdout)["data"] == {"message": "No such option: --bogus", "code": "bad_input", "exit_code": 2}
    plain = CliRunner().invoke(app, ["status", "--bogus"])
    assert plain.exit_code == 2 and plain.stdout == ""


def test_an_aws_error_inside_a_command_is_one_line_too(aws) -> None:
    """A stack whose tracking table is gone: the query fails after connecting; one line, exit 2."""
    from dataclasses import MISSING, fields

    from stack.resources import StackResources

    outputs = {f.name: {"Value": f"gone-{f.name}"} for f in fields(StackResources) if f.default is MISSING and f.name != "stack_name"}
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}, "Outputs": outputs}
    boto3.client("cloudformation").create_stack(StackName="pipeops", TemplateBody=json.dumps(template))
    result = CliRunner().invoke(app, ["jobs", "--status", "FAILED", "--json"])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("error: AWS refused Query: ResourceNotFoundException")
    assert json.loads(result.stdout)["data"]["code"] == "aws_error"


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
    unknown = runner.invoke(app, ["job", "show", "nope/", "--json"])
    assert unknown.exit_code == 2 and "no runs recorded for job 'nope/'" in unknown.stderr
    assert json.loads(unknown.stdout)["data"]["code"] == "not_found"


def test_a_served_sandbox_answers_the_cli_and_plain_boto3_in_other_processes(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with sandbox_up_process("--port", "0") as server:
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
        [said] = against_aws.stderr.splitlines()
        assert against_aws.returncode == 2 and "no AWS credentials found" in said and "AWS_PROFILE" in said
        # A region the sandbox has no backend for (moto answers 500): one line, in JSON too.
        unknown = subprocess.run(
            [sys.executable, "-m", "pipeops.cli", "jobs", "--endpoint-url", endpoint, "--region", "mars-1", "--json"],
            capture_output=True, text=True, env=client_env, timeout=120, check=False,
        )
        assert unknown.returncode == 2, unknown.stderr
        assert json.loads(unknown.stdout)["data"]["code"] == "bad_connection"
        [said] = unknown.stderr.splitlines()
        assert "region 'mars-1' (from --region) is not one botocore knows" in said
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x")
        assert info["outputs"]["InputBucketName"] in {b["Name"] for b in s3.list_buckets()["Buckets"]}
    assert server.returncode == 0
