"""A served sandbox is ready when it says so: scripted the way one waits for a real stack.

Start `pipeops sandbox up` in the background, poll `describe_stacks` until CREATE_COMPLETE (the
port may not even be bound yet), read the Outputs, upload at once: every file must reach a
terminal run in the table the Outputs name, and nothing must have created a second copy of any
resource. Before the readiness gate, uploads in the first seconds were lost or landed in a
tracking table that the stack did not name.

The windows that lost them are forced, not hoped for: a served sandbox in this process is paused
inside its start-up (stack created but not yet corrected; deployed but the event bus not yet
running) while a client polls, and the client must be held until the start-up ends. The CLI in
its own process is run once, as users start it.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from pipeline.stores.tracking import HEAD_SORT_KEY, RunRecord
from tests.conftest import sandbox_up_process

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


def wait_for_create_complete(endpoint: str, still_starting: Callable[[], None]) -> dict[str, str]:
    """The stack's Outputs once CREATE_COMPLETE; `still_starting` raises if the sandbox gave up."""
    cfn = client("cloudformation", endpoint)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        still_starting()
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


def upload_and_check_every_file_is_processed(endpoint: str, outputs: dict[str, str]) -> None:
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


def pause_point(name: str) -> tuple[Any, str]:
    """Where a start-up is paused: the (owner, attribute) of the step that waits for the test."""
    from sandbox import deploy
    from sandbox.eventbus import EventBus

    return {
        "stack created, not yet corrected": (deploy, "_correct_moto"),
        "deployed, event bus not yet running": (EventBus, "start"),
    }[name]


PAUSE_POINTS = ["stack created, not yet corrected", "deployed, event bus not yet running"]


@pytest.mark.parametrize("pause_at", PAUSE_POINTS)
def test_a_client_polling_during_the_start_up_is_held_until_the_sandbox_delivers(
    pause_at: str, aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.core.base_backend import BackendDict

    from pipeline.handlers import _wiring
    from pipeops.pipeline_sandbox import pipeline_sandbox
    from sandbox.serving import ReadinessGate

    owner, attribute = pause_point(pause_at)
    real_step = getattr(owner, attribute)
    paused, resume, held = threading.Event(), threading.Event(), threading.Event()

    def pausing_step(*args: Any, **kwargs: Any) -> Any:
        paused.set()
        assert resume.wait(START_TIMEOUT), "the test never resumed the start-up"
        return real_step(*args, **kwargs)

    real_gate_wait = ReadinessGate.wait

    def noticing_wait(self: ReadinessGate, timeout: float) -> str | None:
        held.set()  # a request that is not the sandbox's own waits at the gate
        return real_gate_wait(self, timeout)

    monkeypatch.setattr(owner, attribute, pausing_step)
    monkeypatch.setattr(ReadinessGate, "wait", noticing_wait)
    sandbox = pipeline_sandbox(serve=True)  # as `pipeops sandbox up` composes it
    failed: list[BaseException] = []

    def start() -> None:
        try:
            sandbox.start()
        except BaseException as exc:  # reported by the test thread
            failed.append(exc)

    def still_starting() -> None:
        assert not failed, f"the sandbox failed to start: {failed}"

    BackendDict.reset()  # a served sandbox uses this process's moto: no stack of an earlier test in it
    starter = threading.Thread(target=start, name="sandbox-start")
    starter.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not paused.is_set() and starter.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert paused.is_set(), f"the start-up never reached {pause_at!r}: {failed}"
        endpoint = sandbox.endpoint_url
        assert endpoint
        answered: list[dict[str, str]] = []

        def poll() -> None:
            answered.append(wait_for_create_complete(endpoint, still_starting))

        poller = threading.Thread(target=poll, name="client-polling")
        poller.start()
        while not held.is_set() and poller.is_alive():
            time.sleep(0.01)
        assert held.is_set() and answered == [], f"answered while the sandbox was {pause_at}"
        resume.set()
        poller.join(START_TIMEOUT)
        starter.join(START_TIMEOUT)
        still_starting()
        [outputs] = answered
        _wiring.reset()
        upload_and_check_every_file_is_processed(endpoint, outputs)
    finally:
        resume.set()
        starter.join(START_TIMEOUT)
        sandbox.stop()
        _wiring.reset()
        BackendDict.reset()


def test_uploads_right_after_create_complete_are_all_processed() -> None:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with sandbox_up_process("--port", str(port), stdout=subprocess.DEVNULL) as server:

        def still_starting() -> None:
            assert server.poll() is None, f"sandbox up exited: {server.stderr.read()}"  # type: ignore[union-attr]

        outputs = wait_for_create_complete(endpoint, still_starting)
        upload_and_check_every_file_is_processed(endpoint, outputs)
