"""Two router invocations on one run, interleaved step by step on moto (docs/ARCHITECTURE.md#router).

SQS delivers at least once, ingest re-announces a run and a DLQ redrive gives a message a new id,
so two invocations routing one run at once is normal. Each test forces one interleaving
deterministically: a store or client method of one invocation is wrapped so that the other
invocation's whole route (or a crash) happens at that exact point. No sleeps, no threads.

The invariant checked after each: a slot is held exactly while an execution of that name runs
or can still start, and `active_count` equals the number of holders.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from pipeline.config import load_settings
from pipeline.jobs import JobMessage, RunRef, execution_arn, format_timestamp
from pipeline.queue import JobQueue
from pipeline.routing import (
    MAX_LOOKS,
    InconsistentRunError,
    RouteOutcome,
    Router,
    StartExecutionError,
    resend_delay,
    waited,
    waits_of,
)
from pipeline.status import JobStatus
from pipeline.stores.executions import ExecutionsStore
from pipeline.stores.semaphore import JointWrite, Semaphore
from pipeline.stores.tracking import TrackingStore
from tests.conftest import drain_queue

NOW = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)


class Crash(BaseException):
    """The Lambda process dies here: nothing after this point runs, no handler cleans up."""


def tracking(resources) -> TrackingStore:
    return TrackingStore(resources.tracking_table, resources.client("dynamodb"))


def semaphore(resources) -> Semaphore:
    return Semaphore(resources.coordination_table, resources.client("dynamodb"))


def make_router(resources, max_slots: int = 1) -> Router:
    """A router with its own clients, as a separate Lambda invocation would have."""
    settings = replace(load_settings(), max_concurrent_workflows=max_slots)
    queue = JobQueue(resources.client("sqs"), resources.main_queue_url)
    executions = ExecutionsStore(resources.client("stepfunctions"), resources.state_machine_arn)
    return Router(tracking(resources), semaphore(resources), executions, queue.send, settings)


def queued_run(resources, job_id: str = "claims/", files: tuple[str, ...] = ("claims/a.txt",)) -> JobMessage:
    run = RunRef(job_id, format_timestamp(NOW))
    tracking(resources).create_run(run, files, resources.input_bucket, NOW)
    return JobMessage(run.job_id, run.started_at, resources.input_bucket)


def route(router: Router, message: JobMessage):
    return router.route(message, NOW, {})


def after_first_call(target: Any, method: str, step: Callable[[], Any]) -> None:
    """Run `step` right after the first call of `target.method` returns (later calls unchanged)."""
    original = getattr(target, method)
    calls = 0

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        result = original(*args, **kwargs)
        calls += 1
        if calls == 1:
            step()
        return result

    setattr(target, method, wrapped)


def replace_first_call(target: Any, method: str, instead: Callable[..., Any]) -> None:
    """The first call of `target.method` runs `instead(original, **kwargs)`; later calls are unchanged."""
    original = getattr(target, method)
    calls = 0

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            return instead(original, *args, **kwargs)
        return original(*args, **kwargs)

    setattr(target, method, wrapped)


def refused(code: str = "ThrottlingException", status: int = 400) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "refused"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "StartExecution",
    )


def running(resources) -> list[str]:
    sfn = resources.client("stepfunctions")
    executions = sfn.list_executions(stateMachineArn=resources.state_machine_arn, statusFilter="RUNNING")
    return sorted(e["name"] for e in executions["executions"])


def assert_slots(resources, *holders: str) -> None:
    state = semaphore(resources).read()
    assert set(state.holders) == set(holders)
    assert state.active_count == len(state.holders)


# -- 1. the measured bug: B read QUEUED, A routed fully, B must not free A's slot ---------------


def test_a_router_that_read_the_run_queued_never_frees_the_slot_of_the_execution_another_started(resources) -> None:
    message = queued_run(resources)
    a, b = make_router(resources), make_router(resources)
    after_first_call(b._store, "get_run_and_slots", lambda: route(a, message))

    result = route(b, message)

    assert result.outcome is RouteOutcome.DUPLICATE
    name = message.run.execution_name
    assert running(resources) == [name]
    assert_slots(resources, name)
    # So the max holds: another job now waits instead of starting a second execution.
    other = queued_run(resources, "other/", ("other/a.txt",))
    assert route(make_router(resources), other).outcome is RouteOutcome.WAITING
    assert running(resources) == [name]


def test_a_router_that_read_the_run_queued_while_another_admitted_it_takes_no_second_slot(resources) -> None:
    """B read QUEUED; A took the slot and froze the run but has not called StartExecution yet."""
    message = queued_run(resources)
    a, b = make_router(resources, max_slots=2), make_router(resources, max_slots=2)

    def crash(original: Callable[..., Any], **kwargs: Any) -> Any:
        raise Crash

    replace_first_call(a._executions._sfn, "start_execution", crash)
    with pytest.raises(Crash):
        route(a, message)  # A died between admission and StartExecution
    stale = tracking(resources).get_run(message.run)
    assert stale is not None and stale.status is JobStatus.IN_PROGRESS

    result = route(b, message)  # carries on under A's slot: same name, so it is idempotent

    name = message.run.execution_name
    assert result.outcome is RouteOutcome.STARTED
    assert running(resources) == [name]
    assert_slots(resources, name)
    record = tracking(resources).get_run(message.run)
    assert record is not None and record.execution_arn == execution_arn(resources.state_machine_arn, name)


def test_while_the_first_router_is_inside_start_execution_the_second_starts_it_and_the_first_keeps_the_slot(
    resources,
) -> None:
    """A admitted and is calling StartExecution; B carries on and starts it; A's call is refused.

    A cannot give the slot back: B started an execution under it. A's release is fenced on
    its own admission, which B's claim replaced.
    """
    message = queued_run(resources)
    a, b = make_router(resources), make_router(resources)

    def b_starts_then_a_is_refused(original: Callable[..., Any], **kwargs: Any) -> Any:
        assert route(b, message).outcome is RouteOutcome.STARTED
        raise refused()

    replace_first_call(a._executions._sfn, "start_execution", b_starts_then_a_is_refused)
    with pytest.raises(StartExecutionError) as raised:
        route(a, message)
    assert not raised.value.released

    name = message.run.execution_name
    assert running(resources) == [name]
    assert_slots(resources, name)


def test_while_the_first_router_is_inside_start_execution_a_duplicate_starts_nothing_twice(resources) -> None:
    message = queued_run(resources)
    a, b = make_router(resources), make_router(resources)

    def b_routes_first(original: Callable[..., Any], **kwargs: Any) -> Any:
        route(b, message)
        return original(**kwargs)

    replace_first_call(a._executions._sfn, "start_execution", b_routes_first)
    route(a, message)

    name = message.run.execution_name
    assert running(resources) == [name]
    assert_slots(resources, name)
    record = tracking(resources).get_run(message.run)
    assert record is not None and record.execution_arn == execution_arn(resources.state_machine_arn, name)


def test_when_both_routers_are_refused_the_slot_stays_held_and_the_next_delivery_starts_the_run(resources) -> None:
    """Neither may give the slot back (B adopted A's slot; B took none), so nothing can over-admit;
    the slot is not lost either: the retried message carries on under it."""
    message = queued_run(resources)
    a, b = make_router(resources), make_router(resources)
    replace_first_call(b._executions._sfn, "start_execution", lambda original, **kwargs: (_ for _ in ()).throw(refused()))

    def b_is_refused_then_a_is_refused(original: Callable[..., Any], **kwargs: Any) -> Any:
        with pytest.raises(StartExecutionError) as b_raised:
            route(b, message)
        assert not b_raised.value.released
        raise refused()

    replace_first_call(a._executions._sfn, "start_execution", b_is_refused_then_a_is_refused)
    with pytest.raises(StartExecutionError) as raised:
        route(a, message)
    assert not raised.value.released
    name = message.run.execution_name
    assert running(resources) == []
    assert_slots(resources, name)

    assert route(make_router(resources), message).outcome is RouteOutcome.STARTED
    assert running(resources) == [name]
    assert_slots(resources, name)


def test_a_slot_left_held_while_the_run_is_still_queued_is_carried_on_not_counted_twice(resources) -> None:
    """A holder with a QUEUED run (left by a router from before admission was one transaction)."""
    message = queued_run(resources)
    name = message.run.execution_name
    semaphore(resources).acquire(name, format_timestamp(NOW), 1)

    assert route(make_router(resources), message).outcome is RouteOutcome.STARTED
    assert running(resources) == [name]
    assert_slots(resources, name)
    record = tracking(resources).get_run(message.run)
    assert record is not None and record.status is JobStatus.IN_PROGRESS


def add_file(resources, run: RunRef, key: str) -> None:
    """What ingest does for a file that joins a QUEUED run."""
    resources.client("dynamodb").update_item(
        TableName=resources.tracking_table,
        Key={"job_id": {"S": run.job_id}, "started_at": {"S": run.started_at}},
        UpdateExpression="ADD files :k SET updated_at = :now",
        ExpressionAttributeValues={":k": {"SS": [key]}, ":now": {"S": format_timestamp(NOW.replace(minute=1))}},
    )


def test_a_file_that_joins_between_the_read_and_the_admission_is_in_the_frozen_run(resources) -> None:
    message = queued_run(resources)
    a = make_router(resources)
    after_first_call(a._store, "get_run_and_slots", lambda: add_file(resources, message.run, "claims/late.txt"))
    seen: dict[str, Any] = {}
    original = a._executions._sfn.start_execution

    def start(**kwargs: Any) -> Any:
        seen.update(json.loads(kwargs["input"]))
        return original(**kwargs)

    a._executions._sfn.start_execution = start
    assert route(a, message).outcome is RouteOutcome.STARTED
    assert seen["files"] == ["claims/a.txt", "claims/late.txt"]


def test_a_run_of_unsupported_files_is_admitted_after_all_when_a_supported_file_joins_meanwhile(resources) -> None:
    message = queued_run(resources, "scans/", ("scans/a.pdf",))
    a = make_router(resources)
    after_first_call(a._store, "get_run_and_slots", lambda: add_file(resources, message.run, "scans/notes.txt"))

    result = route(a, message)

    assert result.outcome is RouteOutcome.STARTED
    assert result.unsupported == 1
    assert running(resources) == [message.run.execution_name]


def test_a_run_past_in_progress_with_no_execution_is_reported_not_restarted(resources) -> None:
    message = queued_run(resources)
    tracking(resources).transition(message.run, JobStatus.DETECTING, NOW)
    with pytest.raises(InconsistentRunError):
        route(make_router(resources), message)
    assert running(resources) == []
    assert_slots(resources)


# -- a run that keeps changing under the router: re-sent shortly, never failed ----------------------


def after_every_call(target: Any, method: str, step: Callable[[int], Any]) -> None:
    """Run `step(n)` right after the n-th call of `target.method` returns, for every call."""
    original = getattr(target, method)
    calls = 0

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        result = original(*args, **kwargs)
        calls += 1
        step(calls)
        return result

    setattr(target, method, wrapped)


def recording_sends(router: Router) -> list[tuple[JobMessage, int]]:
    """The router's re-sends (message, delay), still sent to the queue."""
    sends: list[tuple[JobMessage, int]] = []
    send = router._defer

    def defer(message: JobMessage, delay: int) -> None:
        sends.append((message, delay))
        send(message, delay)

    router._defer = defer  # type: ignore[method-assign]
    return sends


def test_a_folder_still_filling_is_re_sent_shortly_not_failed(resources) -> None:
    """A file joins the run after each of the router's looks (a folder still uploading after its
    settle delay): every admission is refused, and the message comes back after the short delay
    instead of raising (and returning only after the queue's visibility timeout)."""
    message = queued_run(resources)
    a = make_router(resources)
    after_every_call(a._store, "get_run_and_slots", lambda n: add_file(resources, message.run, f"claims/late{n}.txt"))
    sends = recording_sends(a)

    result = route(a, message)

    assert result.outcome is RouteOutcome.RESENT
    assert sends == [(message, resend_delay(a._settings))]  # not a capacity wait: no wait counted
    assert waits_of(sends[0][0]) == 0
    record = tracking(resources).get_run(message.run)
    assert record is not None and record.status is JobStatus.QUEUED and len(record.files) == 1 + MAX_LOOKS
    # The run stays announced across the delay (the reconciler does not send it again meanwhile).
    assert record.announce_deadline >= format_timestamp(NOW + timedelta(seconds=resend_delay(a._settings)))
    assert_slots(resources)
    assert running(resources) == []


def test_the_re_sent_message_starts_the_run_with_every_file_once_it_settles(resources) -> None:
    message = queued_run(resources)
    a = make_router(resources)
    after_every_call(a._store, "get_run_and_slots", lambda n: add_file(resources, message.run, f"claims/late{n}.txt"))
    sends = recording_sends(a)
    route(a, message)
    [(again, _)] = sends
    seen: dict[str, Any] = {}
    b = make_router(resources)
    original = b._executions._sfn.start_execution

    def start(**kwargs: Any) -> Any:
        seen.update(json.loads(kwargs["input"]))
        return original(**kwargs)

    b._executions._sfn.start_execution = start

    assert route(b, again).outcome is RouteOutcome.STARTED
    assert len(seen["files"]) == 1 + MAX_LOOKS
    assert_slots(resources, message.run.execution_name)


def test_a_semaphore_item_other_routers_keep_busy_is_re_sent_too(resources) -> None:
    message = queued_run(resources)
    a = make_router(resources)
    a._semaphore.admit = lambda *args, **kwargs: JointWrite.CONFLICT  # type: ignore[method-assign]
    sends = recording_sends(a)
    assert route(a, message).outcome is RouteOutcome.RESENT
    assert [delay for _, delay in sends] == [resend_delay(a._settings)]
    assert_slots(resources)


def test_a_run_that_settles_between_two_looks_is_admitted_without_a_re_send(resources) -> None:
    message = queued_run(resources)
    a = make_router(resources)
    after_every_call(
        a._store,
        "get_run_and_slots",
        lambda n: add_file(resources, message.run, f"claims/late{n}.txt") if n < MAX_LOOKS else None,
    )
    sends = recording_sends(a)
    assert route(a, message).outcome is RouteOutcome.STARTED
    assert sends == []


# -- 2. StartExecution refused, or its answer lost -------------------------------------------


def test_a_refused_start_gives_the_slot_back_and_the_redelivery_starts_the_run(resources) -> None:
    message = queued_run(resources)
    a = make_router(resources)
    replace_first_call(a._executions._sfn, "start_execution", lambda original, **kwargs: (_ for _ in ()).throw(refused()))
    with pytest.raises(StartExecutionError) as raised:
        route(a, message)
    assert raised.value.released
    assert_slots(resources)
    assert running(resources) == []

    result = route(make_router(resources), message)

    name = message.run.execution_name
    assert result.outcome is RouteOutcome.STARTED
    assert running(resources) == [name]
    assert_slots(resources, name)


def test_a_start_whose_answer_was_lost_keeps_the_slot_when_the_execution_exists(resources) -> None:
    message = queued_run(resources)
    a = make_router(resources)

    def started_then_timed_out(original: Callable[..., Any], **kwargs: Any) -> Any:
        original(**kwargs)
        raise ReadTimeoutError(endpoint_url="https://states.example")

    replace_first_call(a._executions._sfn, "start_execution", started_then_timed_out)
    result = route(a, message)

    name = message.run.execution_name
    assert result.outcome is RouteOutcome.STARTED
    assert running(resources) == [name]
    assert_slots(resources, name)
    record = tracking(resources).get_run(message.run)
    assert record is not None and record.execution_arn == execution_arn(resources.state_machine_arn, name)


def test_a_start_whose_answer_was_lost_releases_only_once_describe_says_none_exists(resources) -> None:
    message = queued_run(resources)
    a = make_router(resources)

    def timed_out(original: Callable[..., Any], **kwargs: Any) -> Any:
        raise ReadTimeoutError(endpoint_url="https://states.example")

    replace_first_call(a._executions._sfn, "start_execution", timed_out)
    with pytest.raises(StartExecutionError) as raised:
        route(a, message)
    assert raised.value.released
    assert_slots(resources)
    assert running(resources) == []


def test_a_start_whose_answer_was_lost_keeps_the_slot_when_describe_fails_too(resources) -> None:
    message = queued_run(resources)
    a = make_router(resources)

    def timed_out(original: Callable[..., Any], **kwargs: Any) -> Any:
        raise ReadTimeoutError(endpoint_url="https://states.example")

    def describe_unavailable(original: Callable[..., Any], **kwargs: Any) -> Any:
        raise refused("ServiceUnavailable", 503)

    replace_first_call(a._executions._sfn, "start_execution", timed_out)
    replace_first_call(a._executions._sfn, "describe_execution", describe_unavailable)
    with pytest.raises(StartExecutionError) as raised:
        route(a, message)
    assert not raised.value.released  # unknown whether it runs: keep the slot; the retry settles it
    assert_slots(resources, message.run.execution_name)


# -- 3. a crash after StartExecution, before the ARN was written -------------------------------


def crash_before_the_arn_is_written(resources) -> JobMessage:
    message = queued_run(resources)
    a = make_router(resources)

    def crash(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        raise Crash

    replace_first_call(a._store, "record_execution", crash)
    with pytest.raises(Crash):
        route(a, message)
    record = tracking(resources).get_run(message.run)
    assert record is not None and record.execution_arn is None
    return message


def test_a_redelivery_records_the_arn_a_crashed_router_never_wrote(resources) -> None:
    message = crash_before_the_arn_is_written(resources)
    name = message.run.execution_name

    result = route(make_router(resources), message)

    assert result.outcome is RouteOutcome.REPAIRED
    record = tracking(resources).get_run(message.run)
    assert record is not None and record.execution_arn == execution_arn(resources.state_machine_arn, name)
    assert running(resources) == [name]
    assert_slots(resources, name)


def test_a_redelivery_repairs_the_arn_of_a_run_that_completed_meanwhile(resources) -> None:
    message = crash_before_the_arn_is_written(resources)
    name = message.run.execution_name
    tracking(resources).transition(message.run, JobStatus.COMPLETE, NOW)  # the workflow finished
    semaphore(resources).release(name)  # and the tracker gave its slot back

    result = route(make_router(resources), message)

    assert result.outcome is RouteOutcome.REPAIRED
    record = tracking(resources).get_run(message.run)
    assert record is not None and record.status is JobStatus.COMPLETE
    assert record.execution_arn == execution_arn(resources.state_machine_arn, name)
    assert_slots(resources)


def test_a_redelivery_after_the_execution_ended_takes_no_slot(resources) -> None:
    message = crash_before_the_arn_is_written(resources)
    name = message.run.execution_name
    sfn = resources.client("stepfunctions")
    sfn.stop_execution(executionArn=execution_arn(resources.state_machine_arn, name))
    semaphore(resources).release(name)  # what the tracker did on the ABORTED event

    result = route(make_router(resources), message)

    assert result.outcome is RouteOutcome.REPAIRED
    assert_slots(resources)
    assert running(resources) == []


# -- 4. capacity waits: two routers at capacity, and messages that waited before -----------------


def resent(resources) -> list[JobMessage]:
    return [JobMessage.from_json(m["Body"]) for m in drain_queue(resources.client("sqs"), resources.main_queue_url)]


def test_two_routers_at_capacity_both_wait_and_neither_takes_a_slot(resources) -> None:
    semaphore(resources).acquire("busy", format_timestamp(NOW), 1)
    message = queued_run(resources)
    a, b = make_router(resources), make_router(resources)
    after_first_call(a._store, "get_run_and_slots", lambda: route(b, message))

    assert route(a, message).outcome is RouteOutcome.WAITING

    assert_slots(resources, "busy")
    assert [waits_of(m) for m in resent(resources)] == [1, 1]  # one copy each: the router starts a run once
    record = tracking(resources).get_run(message.run)
    assert record is not None and record.status is JobStatus.QUEUED and record.execution_arn is None


def test_a_message_that_waited_renews_the_runs_lease_in_one_write_while_every_slot_is_held(resources) -> None:
    semaphore(resources).acquire("busy", format_timestamp(NOW), 1)
    message = waited(queued_run(resources))
    a = make_router(resources)
    a._store.get_run_and_slots = None  # type: ignore[assignment]  # it must not read anything

    assert route(a, message).outcome is RouteOutcome.WAITING

    record = tracking(resources).get_run(message.run)
    retry = a._settings.capacity_retry_seconds
    assert record is not None and record.announce_deadline == format_timestamp(NOW + timedelta(seconds=retry * 4))
    assert [waits_of(m) for m in resent(resources)] == [2]
    assert_slots(resources, "busy")


def test_a_message_that_waited_is_admitted_once_a_slot_is_free(resources) -> None:
    message = waited(queued_run(resources))
    assert route(make_router(resources), message).outcome is RouteOutcome.STARTED
    name = message.run.execution_name
    assert running(resources) == [name]
    assert_slots(resources, name)


def test_a_message_that_waited_for_a_run_another_router_started_is_a_duplicate(resources) -> None:
    """The lease write is refused (the run has its execution), so it looks, and finds it started;
    the slot the other run holds is left alone, and nothing is re-sent."""
    message = queued_run(resources)
    assert route(make_router(resources), message).outcome is RouteOutcome.STARTED

    assert route(make_router(resources), waited(message)).outcome is RouteOutcome.DUPLICATE

    assert_slots(resources, message.run.execution_name)
    assert resent(resources) == []


def test_a_slot_freed_between_the_read_and_the_wait_costs_one_more_wait_not_a_lost_run(resources) -> None:
    semaphore(resources).acquire("busy", format_timestamp(NOW), 1)
    message = queued_run(resources)
    a = make_router(resources)
    after_first_call(a._store, "get_run_and_slots", lambda: semaphore(resources).release("busy"))

    assert route(a, message).outcome is RouteOutcome.WAITING
    [again] = resent(resources)
    assert route(make_router(resources), again).outcome is RouteOutcome.STARTED
    assert_slots(resources, message.run.execution_name)


# -- 5. a count set below its holders: the holders bound admission too ---------------------------


def hand_set_count(resources, value: int) -> None:
    resources.client("dynamodb").update_item(
        TableName=resources.coordination_table,
        Key={"doc_key": {"S": "workflow_counter"}},
        UpdateExpression="SET active_count = :v",
        ExpressionAttributeValues={":v": {"N": str(value)}},
    )


def test_a_count_hand_set_below_its_holders_starts_no_run_beyond_the_max(resources) -> None:
    first, second, third = (queued_run(resources, f"job{i}/", (f"job{i}/a.txt",)) for i in range(3))
    assert route(make_router(resources, 2), first).outcome is RouteOutcome.STARTED
    assert route(make_router(resources, 2), second).outcome is RouteOutcome.STARTED
    hand_set_count(resources, -3)

    assert route(make_router(resources, 2), third).outcome is RouteOutcome.WAITING

    assert running(resources) == sorted([first.run.execution_name, second.run.execution_name])


def test_a_count_hand_set_below_after_the_router_read_is_refused_by_the_holders(resources) -> None:
    """The router reads one holder (a slot free), then a second run starts and the count is set to
    -3: the admission itself, not only the read, is bounded by the holders."""
    first, second, third = (queued_run(resources, f"job{i}/", (f"job{i}/a.txt",)) for i in range(3))
    assert route(make_router(resources, 2), first).outcome is RouteOutcome.STARTED
    c = make_router(resources, 2)

    def meanwhile() -> None:
        assert route(make_router(resources, 2), second).outcome is RouteOutcome.STARTED
        hand_set_count(resources, -3)

    after_first_call(c._store, "get_run_and_slots", meanwhile)

    assert route(c, third).outcome is RouteOutcome.WAITING
    assert len(running(resources)) == 2
    assert third.run.execution_name not in semaphore(resources).read().holders
