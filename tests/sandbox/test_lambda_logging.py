"""sandbox.lambda_logging: Lambda's log format and application log level, as AWS documents them,
alone and applied by the runtime to a function's variables, log group and EMF metrics."""

from __future__ import annotations

import io
import json
import logging
import zipfile
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from sandbox import lambda_logging
from sandbox.lambda_logging import delivered, environment, level_of
from sandbox.runtime import LambdaRuntime

TOY_HANDLERS = Path(__file__).parent / "toy_handlers"
REGION = "us-east-1"
STAMP = "2026-12-03T09:00:00.000+00:00"


def line(level: str, timestamp: str | None = STAMP) -> str:
    return json.dumps({"level": level} | ({"timestamp": timestamp} if timestamp else {}))


@pytest.mark.parametrize(
    ("text", "level"),
    [
        (line("debug"), "DEBUG"),
        (line("WARNING"), "WARN"),
        (line("CRITICAL"), "FATAL"),
        (line("ERROR", "2026-12-03 09:00:00Z"), "ERROR"),
        (line("ERROR", "2026-12-03 09:00:00,915+0000"), "INFO"),  # not RFC 3339: INFO
        (line("ERROR", None), "INFO"),
        (line("LOUD"), "INFO"),  # not a level: INFO
        ('{"_aws": {"Timestamp": 1}, "Ticks": 1}', "INFO"),  # EMF: no level
        ("plain text", "INFO"),
        ("[1, 2]", "INFO"),
    ],
)
def test_lambda_reads_a_lines_level_or_takes_it_for_info(text: str, level: str) -> None:
    assert level_of(text) == level


def test_the_json_format_sets_lambdas_variables_and_text_sets_none() -> None:
    assert environment({"LogFormat": "JSON", "ApplicationLogLevel": "ERROR"}) == {
        "AWS_LAMBDA_LOG_FORMAT": "JSON",
        "AWS_LAMBDA_LOG_LEVEL": "ERROR",
    }
    assert environment({"LogFormat": "JSON"})["AWS_LAMBDA_LOG_LEVEL"] == "INFO"  # Lambda's default
    assert environment({"LogFormat": "Text", "ApplicationLogLevel": "ERROR"}) == {}
    assert environment({}) == {}


def test_lines_below_the_application_level_are_dropped_and_an_emf_line_counts_as_info() -> None:
    emf = '{"_aws": {"Timestamp": 1}, "Ticks": 1}'
    lines = [(1, line("DEBUG")), (2, line("INFO")), (3, emf), (4, line("ERROR")), (5, "text")]
    assert delivered(lines, {"LogFormat": "JSON", "ApplicationLogLevel": "INFO"}) == lines[1:]
    assert delivered(lines, {"LogFormat": "JSON", "ApplicationLogLevel": "WARN"}) == [(4, line("ERROR"))]
    assert delivered(lines, {"LogFormat": "Text", "ApplicationLogLevel": "FATAL"}) == lines


@pytest.fixture
def function_arn(monkeypatch: pytest.MonkeyPatch):
    for key, value in {
        "AWS_ACCESS_KEY_ID": "t",
        "AWS_SECRET_ACCESS_KEY": "t",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    logging.getLogger("moto").setLevel(logging.WARNING)
    with mock_aws():
        role = boto3.client("iam").create_role(RoleName="sbx-levels", AssumeRolePolicyDocument="{}")["Role"][
            "Arn"
        ]
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("placeholder.py", "")
        arn = boto3.client("lambda").create_function(
            FunctionName="sbx-levels",
            Runtime="python3.12",
            Role=role,
            Handler="sbx_log_levels.handler",
            Code={"ZipFile": buf.getvalue()},
        )["FunctionArn"]
        yield arn
        lambda_logging.configure(arn, None)


def run_once(function_arn: str, config: dict[str, str] | None) -> tuple[dict, list[str], list[str]]:
    """(the handler's variables, the log group's application lines, the metrics published)."""
    lambda_logging.configure(function_arn, config)
    with LambdaRuntime(region=REGION, extra_sys_path=[TOY_HANDLERS]):
        response = boto3.client("lambda").invoke(FunctionName="sbx-levels", Payload=b"{}")
        variables = json.loads(response["Payload"].read())
    events = boto3.client("logs").filter_log_events(logGroupName="/aws/lambda/sbx-levels")["events"]
    lines = [e["message"] for e in events if not e["message"].startswith(("START", "END", "REPORT"))]
    metrics = [
        m["MetricName"] for m in boto3.client("cloudwatch").list_metrics(Namespace="SbxLevels")["Metrics"]
    ]
    return variables, lines, metrics


def messages(lines: list[str]) -> list[str]:
    return [json.loads(t).get("message", "EMF") if t.startswith("{") else t for t in lines]


def test_at_info_the_runtime_sets_the_level_and_emf_becomes_metrics(function_arn: str) -> None:
    variables, lines, metrics = run_once(function_arn, {"LogFormat": "JSON", "ApplicationLogLevel": "INFO"})
    assert variables == {"AWS_LAMBDA_LOG_FORMAT": "JSON", "AWS_LAMBDA_LOG_LEVEL": "INFO"}
    assert messages(lines) == [
        "info line",
        "warning line",
        "error line",
        "badly stamped error",
        "plain text line",
        "EMF",
    ]
    assert metrics == ["Ticks"]


def test_above_info_lambda_drops_every_line_without_a_level_emf_included(function_arn: str) -> None:
    variables, lines, metrics = run_once(function_arn, {"LogFormat": "JSON", "ApplicationLogLevel": "WARN"})
    assert variables["AWS_LAMBDA_LOG_LEVEL"] == "WARN"
    assert messages(lines) == ["warning line", "error line"]
    assert metrics == [], "an EMF document has no level: Lambda takes it for INFO and drops it"


def test_the_text_format_filters_nothing(function_arn: str) -> None:
    variables, lines, metrics = run_once(function_arn, None)
    assert variables == {"AWS_LAMBDA_LOG_FORMAT": None, "AWS_LAMBDA_LOG_LEVEL": None}
    assert len(lines) == 7 and metrics == ["Ticks"]
