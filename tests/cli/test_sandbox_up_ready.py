"""A served sandbox is ready when it says so: scripted the way one waits for a real stack.

Start `pipeops sandbox up` in the background, poll `describe_stacks` until CREATE_COMPLETE (the
port may not even be bound yet), read the Outputs, upload at once: every file must reach a
terminal run in the table the Outputs name, and nothing must have created a second copy of any
resource. Before the readiness gate, uploads in the first seconds were lost or landed in a
tracking table that the stack did not name.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from pipeline.stores.tracking import HEAD_SORT_KEY, RunRecord

STACK = "pipeops"
START_TIMEOUT = 180.0
PROCESS_TIMEOUT = 240.0
FILES = {
    "claims/a.txt": b"mail ann@corp.example\n",
    "claims/b.txt": b"call 415-555-2671\n",
    "claims/c.txt": b"nothing to see\n",
    "root-note.txt": b"ip 10.1.2.3\n",
}

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def client(service: str, endpoint: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=300),
    )


def wait_for_create_complete(endpoint: str, server: subprocess.Popen[str]) -> dict[str, str]:
    cfn = client("cloudformation", endpoint)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        assert server.poll() is None, f"sandbox up exited: {server.stderr.read()}"  # type: ignore[union-attr]
        try:
            stack = cfn.describe_stacks(StackName=STACK)["Stacks"][0]
        except (BotoCoreError, ClientError):  # not listening yet, or no stack yet
            time.sleep(0.05)
            continue
        if stack["StackStatus"] == "CREATE_COMPLETE":
            return {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
        time.sleep(0.05)
    pytest.fail("the stack never reported CREATE_COMPLETE")


def terminal_owner_of_every_file(endpoint: str, table: str) -> dict[str, RunRecord] | None:
    owners: dict[str, RunRecord] = {}
    pages = client("dynamodb", endpoint).get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
    for page in pages:
        for item in page["Items"]:
            if item["started_at"]["S"] == HEAD_SORT_KEY:
                continue
            run = RunRecord.from_item(item)
            for key in run.files:
                assert key not in owners, f"{key} is in two runs"
                owners[key] = run
    if set(owners) == set(FILES) and all(run.status.is_terminal for run in owners.values()):
        return owners
    return None


@pytest.mark.parametrize("attempt", range(5))
def test_uploads_right_after_create_complete_are_all_processed(attempt: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "pipeops.cli", "sandbox", "up", "--port", str(port), "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        outputs = wait_for_create_complete(endpoint, server)
        s3 = client("s3", endpoint)
        for key, body in FILES.items():
            s3.put_object(Bucket=outputs["InputBucketName"], Key=key, Body=body)

        deadline = time.monotonic() + PROCESS_TIMEOUT
        owners = None
        while owners is None and time.monotonic() < deadline:
            time.sleep(0.5)
            owners = terminal_owner_of_every_file(endpoint, outputs["TrackingTableName"])
        assert owners is not None, "not every uploaded file reached a terminal run in the stack's table"
        assert {run.status.value for run in owners.values()} == {"COMPLETE"}

        tables = client("dynamodb", endpoint).list_tables()["TableNames"]
        assert sorted(tables) == sorted([outputs["TrackingTableName"], outputs["CoordinationTableName"]])
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            pytest.fail("the served sandbox did not stop on SIGTERM")
