"""`pipeops runbook run` follows a redrive's move task over ListMessageMoveTasks answers: no real
sleeping (the sleep is injected) and no AWS (a stand-in answers from a script)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console

from pipeops.commands.runbook import move_task_handles
from pipeops.move_watch import MoveState, ending_line, follow, move_state, watch
from runbooks.automation.redrive import follow_move_task
from runbooks.automation.result import ActionOutcome, ActionResult, PlannedAction, RunbookResult, Verdict

ARN = "arn:aws:sqs:us-east-1:000000000000:ops-dlq"
URL = "https://sqs.us-east-1.amazonaws.com/000000000000/ops-dlq"


def task(status: str, moved: int, to_move: int | None = 3, **more: Any) -> dict[str, Any]:
    answer = {"TaskHandle": "task-1", "Status": status, "ApproximateNumberOfMessagesMoved": moved, **more}
    return answer if to_move is None else {**answer, "ApproximateNumberOfMessagesToMove": to_move}


class ScriptedSqs:
    """Answers ListMessageMoveTasks from a script, one answer per call (the last one repeats)."""

    def __init__(self, answers: Sequence[list[dict[str, Any]]]) -> None:
        self.answers = list(answers)
        self.calls = 0

    def get_queue_attributes(self, QueueUrl: str, AttributeNames: list[str]) -> dict[str, Any]:
        return {"Attributes": {"QueueArn": ARN}}

    def list_message_move_tasks(self, SourceArn: str, MaxResults: int) -> dict[str, Any]:
        assert SourceArn == ARN
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        return {"Results": answer}


def test_a_task_is_polled_until_it_ends_and_each_answer_is_shown() -> None:
    sqs = ScriptedSqs([[task("RUNNING", 0, None)], [task("RUNNING", 1)], [task("COMPLETED", 3)]])
    naps: list[float] = []
    shown: list[MoveState] = []
    last = watch("task-1", follow_move_task(sqs, URL, "task-1", sleep=naps.append, interval=2), shown.append)
    assert [(s.status, s.moved, s.to_move) for s in shown] == [("RUNNING", 0, None), ("RUNNING", 1, 3), ("COMPLETED", 3, 3)]
    assert naps == [2, 2] and sqs.calls == 3  # slept between answers, never after the last
    assert ending_line(last, ARN) == "move task task-1 completed: 3 of 3 message(s) moved back to their queue"


def test_a_task_no_longer_listed_ends_the_watch_as_unknown() -> None:
    sqs = ScriptedSqs([[task("RUNNING", 1)], [{"TaskHandle": "other", "Status": "RUNNING"}]])
    last = watch("task-1", follow_move_task(sqs, URL, "task-1", sleep=lambda _: None), lambda _: None)
    assert last.status == "UNKNOWN" and "ended UNKNOWN" in ending_line(last, ARN)


def test_a_failed_task_says_why() -> None:
    state = move_state("task-1", task("FAILED", 2, FailureReason="AWS.SimpleQueueService.NonExistentQueue"))
    assert ending_line(state, ARN) == "move task task-1 ended FAILED after 2 of 3 message(s): AWS.SimpleQueueService.NonExistentQueue"


def test_ctrl_c_stops_the_watching_leaves_the_task_running_and_says_how_to_check() -> None:
    sqs = ScriptedSqs([[task("RUNNING", 1)]])

    def interrupted(_: float) -> None:
        raise KeyboardInterrupt

    console = Console(record=True, width=300)
    last = follow(sqs, URL, "task-1", console, sleep=interrupted)
    assert last.running and sqs.calls == 1
    text = console.export_text()
    assert "left running (1 of 3 moved so far)" in text and f"aws sqs list-message-move-tasks --source-arn {ARN}" in text


def test_follow_draws_until_the_task_completes() -> None:
    sqs = ScriptedSqs([[task("RUNNING", 1)], [task("COMPLETED", 3)]])
    console = Console(record=True, width=300)
    assert follow(sqs, URL, "task-1", console, sleep=lambda _: None).status == "COMPLETED"
    assert "completed: 3 of 3" in console.export_text()


def test_the_result_names_the_task_it_started_or_the_one_it_raced() -> None:
    action = PlannedAction(kind="redrive", target="run-1", group="g1", reason="router failed")
    started = ActionOutcome(action, ActionResult.APPLIED, {"method": "move_task", "task_handle": "task-1"})
    raced = ActionOutcome(action, ActionResult.RACE_LOST, {"running": ["task-0"]})
    sent = ActionOutcome(action, ActionResult.APPLIED, {"method": "send"})

    def result(*outcomes: ActionOutcome) -> RunbookResult:
        return RunbookResult("dlq-messages", {"kind": "main"}, [action], list(outcomes), Verdict.REMAINS)

    assert move_task_handles(result(started, started)) == ["task-1"]
    assert move_task_handles(result(raced)) == ["task-0"]
    assert move_task_handles(result(sent)) == []
