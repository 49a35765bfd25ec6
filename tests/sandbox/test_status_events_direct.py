"""The status watcher reads hook-reported executions from moto's objects: same events, no round trip."""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID

from sandbox import status_events
from sandbox.seams import execution_events
from sandbox.status_events import ExecutionStatusWatcher, client_description

REGION = "us-east-1"
OTHER_REGION = "eu-west-1"
PASS_DEFINITION = {"StartAt": "P", "States": {"P": {"Type": "Pass", "Result": {"ok": 1}, "End": True}}}
FAIL_DEFINITION = {"StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "Boom", "Cause": "it broke"}}}
WAIT_DEFINITION = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 30, "End": True}}}
TIMEOUT_DEFINITION = {"TimeoutSeconds": 1, **WAIT_DEFINITION}


@pytest.fixture
def aws(aws_env: None) -> Iterator[None]:
    logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield
        for region in (REGION, OTHER_REGION):  # never leave an execution running past the mock
            sfn = boto3.client("stepfunctions", region_name=region)
            for machine in sfn.list_state_machines()["stateMachines"]:
                for ex in sfn.list_executions(stateMachineArn=machine["stateMachineArn"])["executions"]:
                    if ex["status"] == "RUNNING":
                        sfn.stop_execution(executionArn=ex["executionArn"])


class Watched:
    """A watcher on its own stepfunctions client, counting the API calls that client makes."""

    def __init__(self, *, hooks: bool = True) -> None:
        self.client = boto3.client("stepfunctions", region_name=REGION)
        self.calls: list[str] = []
        self.client.meta.events.register("before-call", lambda model, **_: self.calls.append(model.name))
        self.events: list[dict[str, Any]] = []
        self.watcher = ExecutionStatusWatcher(
            lambda: self.client, self.events.append, interval=60.0, hooks=hooks
        )

    def statuses(self, arn: str) -> list[str]:
        return [e["detail"]["status"] for e in self.events if e["detail"]["executionArn"] == arn]

    def settle(self) -> None:
        """Wait for a round that saw every change made so far."""
        assert self.watcher.wait_round(self.watcher.request_round(), 10)


@pytest.fixture
def watched(aws: None) -> Iterator[Callable[..., Watched]]:
    made: list[Watched] = []

    def make(**kwargs: Any) -> Watched:
        made.append(Watched(**kwargs))
        return made[-1]

    yield make
    for w in made:
        w.watcher.stop()
        execution_events.SEAM.detach(w.watcher)


def _role_arn() -> str:
    iam = boto3.client("iam", region_name=REGION)
    try:
        return iam.get_role(RoleName="sbx-direct-role")["Role"]["Arn"]
    except iam.exceptions.NoSuchEntityException:
        return iam.create_role(RoleName="sbx-direct-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]


def make_state_machine(name: str, definition: dict, region: str = REGION) -> str:
    return boto3.client("stepfunctions", region_name=region).create_state_machine(
        name=name, definition=json.dumps(definition), roleArn=_role_arn()
    )["stateMachineArn"]


def start(machine_arn: str, name: str, payload: dict | None = None) -> str:
    return boto3.client("stepfunctions", region_name=machine_arn.split(":")[3]).start_execution(
        stateMachineArn=machine_arn, name=name, input=json.dumps(payload or {"n": name})
    )["executionArn"]


def wait_status(arn: str, wanted: Callable[[str], bool] = lambda s: s != "RUNNING") -> str:
    sfn = boto3.client("stepfunctions", region_name=arn.split(":")[3])
    deadline = time.monotonic() + 10
    while not wanted(status := sfn.describe_execution(executionArn=arn)["status"]):
        assert time.monotonic() < deadline, f"{arn} still {status}"
        time.sleep(0.02)
    return status


def moto_execution(arn: str) -> Any:
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    return stepfunctions_parser_backends[DEFAULT_ACCOUNT_ID][REGION].describe_execution(arn)


def client_view(arn: str) -> dict[str, Any]:
    desc = boto3.client("stepfunctions", region_name=REGION).describe_execution(executionArn=arn)
    desc.pop("ResponseMetadata")
    return desc


def without(event: dict[str, Any], *fields: str) -> dict[str, Any]:
    """The event minus top-level and detail fields (its random id, an observed-at time)."""
    detail = {k: v for k, v in event["detail"].items() if k not in fields}
    return {**{k: v for k, v in event.items() if k not in fields}, "detail": detail}


def by_status(events: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["detail"]["executionArn"], e["detail"]["status"]): e for e in events}


# --------------------------------------------------------------------------- the same as the client


def test_direct_events_equal_the_client_paths_for_every_terminal_status(watched) -> None:
    machines = {
        status: make_state_machine(f"sbx-direct-{status.lower()}", definition)
        for status, definition in [
            ("SUCCEEDED", PASS_DEFINITION),
            ("FAILED", FAIL_DEFINITION),
            ("ABORTED", WAIT_DEFINITION),
            ("TIMED_OUT", TIMEOUT_DEFINITION),
        ]
    }
    direct = watched()
    direct.watcher.baseline()
    direct.watcher.start()

    arns = {status: start(machine, "run-1") for status, machine in machines.items()}
    wait_status(arns["ABORTED"], lambda s: s == "RUNNING")
    boto3.client("stepfunctions", region_name=REGION).stop_execution(executionArn=arns["ABORTED"])
    assert {status: wait_status(arn) for status, arn in arns.items()} == {s: s for s in arns}
    direct.settle()

    # the descriptions: what boto3 gets from moto, field for field (datetimes to the millisecond)
    for arn in arns.values():
        assert client_description(moto_execution(arn)) == client_view(arn)
    assert json.loads(client_view(arns["SUCCEEDED"])["output"]) == {"ok": 1}
    assert "stopDate" not in client_view(arns["TIMED_OUT"])  # moto's rule, mirrored

    # the events: those the client path builds for the same executions
    reference = watched(hooks=False)
    assert reference.watcher.poll_once() == 2 * len(arns)
    assert "DescribeExecution" in reference.calls
    got, expected = by_status(direct.events), by_status(reference.events)
    assert set(got) == set(expected) == {(arn, s) for st, arn in arns.items() for s in ("RUNNING", st)}
    for key, event in got.items():
        # TIMED_OUT has no stopDate: the event carries the time the watcher saw it
        observed_at = ("time", "stopDate") if key[1] == "TIMED_OUT" else ()
        assert without(event, "id", *observed_at) == without(expected[key], "id", *observed_at), key
    assert got[(arns["FAILED"], "FAILED")]["detail"]["cause"] == "it broke"


def test_hook_reported_executions_are_described_without_a_describe_execution_call(watched) -> None:
    machine = make_state_machine("sbx-direct-pass", PASS_DEFINITION)
    failing = make_state_machine("sbx-direct-fail", FAIL_DEFINITION)
    direct = watched()
    direct.watcher.baseline()  # (the client's machines: the scope it sees)
    direct.watcher.start()
    # Its first round is a full one (the safety net). An execution a full round lists before the
    # hook reported it is described through the client, as it should be; so nothing starts before
    # that round is over, and everything after it is hook-reported.
    assert direct.watcher.wait_round(1, timeout=30)

    arns = [start(machine, f"run-{i}") for i in range(4)] + [start(failing, "bad")]
    for arn in arns:
        wait_status(arn)
    direct.settle()

    assert {arn: direct.statuses(arn) for arn in arns} == {
        arn: ["RUNNING", "FAILED" if arn.endswith(":bad") else "SUCCEEDED"] for arn in arns
    }
    assert "DescribeExecution" not in direct.calls
    assert direct.watcher._objects == {}  # each object dropped once its terminal event was out


# --------------------------------------------------------------------------- what the round trip decided


def test_an_execution_moto_no_longer_has_gets_no_event_as_through_the_client(watched) -> None:
    machine = make_state_machine("sbx-direct-gone", WAIT_DEFINITION)
    direct = watched()
    direct.watcher.baseline()
    direct.watcher.start()
    arn = start(machine, "run-1")
    direct.settle()
    assert direct.statuses(arn) == ["RUNNING"]

    execution = moto_execution(arn)
    boto3.client("stepfunctions", region_name=REGION).delete_state_machine(stateMachineArn=machine)
    execution.stop(stop_date=dt.datetime.now(tz=dt.UTC), error=None, cause=None)  # ends: the hook reports it
    deadline = time.monotonic() + 10
    while execution.status == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    direct.settle()

    assert direct.statuses(arn) == ["RUNNING"]  # describe_execution: ExecutionDoesNotExist
    assert arn not in direct.watcher._objects


def test_another_regions_execution_gets_no_event_as_through_the_client(watched) -> None:
    make_state_machine("sbx-direct-here", PASS_DEFINITION)
    there = make_state_machine("sbx-direct-there", PASS_DEFINITION, region=OTHER_REGION)
    direct = watched()
    direct.watcher.baseline()
    direct.watcher.start()

    arn = start(there, "run-1")
    wait_status(arn)
    direct.settle()

    assert direct.statuses(arn) == []  # the client (us-east-1) would not find it
    assert direct.events == []


def light_round(watcher: ExecutionStatusWatcher) -> None:
    """What the watcher's thread does on a hook's report: take the reported ARNs, look at each."""
    with watcher._dirty_lock:
        dirty, watcher._dirty = watcher._dirty, set()
    for arn in sorted(dirty):
        watcher._advance(arn)


def test_a_terminal_status_read_while_its_change_is_made_waits_for_that_change(
    watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = make_state_machine("sbx-direct-mid", PASS_DEFINITION)
    direct = watched()
    watcher = direct.watcher  # not started: the test takes the thread's looks by hand
    watcher.baseline()
    execution_events.SEAM.attach(watcher)
    in_flight, during_read = start(machine, "in-flight"), start(machine, "during-read")
    wait_status(in_flight), wait_status(during_read)  # SUCCEEDED and reported

    # a change still being made when the status is read (moto sets the output just after it)
    watcher.changing(in_flight)
    # a change begun and reported while the watcher reads
    read, changes = status_events.client_description, [during_read]

    def read_while_it_changes(execution: Any) -> dict[str, Any]:
        if execution.execution_arn in changes:
            changes.remove(execution.execution_arn)
            watcher.changing(during_read)
            watcher.notify(during_read)
        return read(execution)

    monkeypatch.setattr(status_events, "client_description", read_while_it_changes)
    light_round(watcher)
    assert direct.statuses(in_flight) == direct.statuses(during_read) == ["RUNNING"]

    watcher.notify(in_flight)  # the change is made
    light_round(watcher)
    for arn in (in_flight, during_read):
        assert direct.statuses(arn) == ["RUNNING", "SUCCEEDED"]
        assert json.loads(by_status(direct.events)[(arn, "SUCCEEDED")]["detail"]["output"]) == {"ok": 1}
    assert "DescribeExecution" not in direct.calls
