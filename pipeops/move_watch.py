"""`pipeops runbook run`: a redrive's SQS move task followed with a progress bar until it ends.

SQS moves the messages after the runbook returns, so only a process that may wait follows it: the
CLI, here, never the runbook automation (it may run in a Lambda, which would pay for the waiting).
The decisions are pure over ListMessageMoveTasks answers (`move_state`, `watch`, `ending_line`);
`follow` is the shell: it polls, draws and lets Ctrl-C leave the task running, saying how to check.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

POLL_SECONDS = 5.0  # SQS updates a task's counts about this often


@dataclass(frozen=True)
class MoveState:
    """One answer about one move task: how far it got, and whether it still runs."""

    handle: str
    status: str  # RUNNING, COMPLETED, CANCELLED, FAILED; UNKNOWN when SQS no longer lists it
    moved: int
    to_move: int | None  # None until SQS has counted
    failure: str = ""

    @property
    def running(self) -> bool:
        return self.status == "RUNNING"


def move_state(handle: str, task: Mapping[str, Any]) -> MoveState:
    """The state of `handle` in one ListMessageMoveTasks result (a `move_progress` entry)."""
    to_move = task.get("ApproximateNumberOfMessagesToMove")
    return MoveState(
        handle=handle,
        status=str(task.get("Status", "UNKNOWN")),
        moved=int(task.get("ApproximateNumberOfMessagesMoved", 0)),
        to_move=None if to_move is None else int(to_move),
        failure=str(task.get("FailureReason", "")),
    )


def watch(handle: str, answers: Iterable[Mapping[str, Any]], show: Callable[[MoveState], None]) -> MoveState:
    """Show each answer about `handle` in turn; the last state (how the task ended, or how far it got)."""
    last = MoveState(handle, "UNKNOWN", 0, None)
    for task in answers:
        last = move_state(handle, task)
        show(last)
    return last


def ending_line(state: MoveState, source_arn: str, *, interrupted: bool = False) -> str:
    """What the operator reads once the bar is gone: the outcome, or how to check a task left running."""
    counted = f"{state.moved} of {state.to_move}" if state.to_move is not None else str(state.moved)
    if interrupted or state.running:
        return (
            f"move task {state.handle} left running ({counted} moved so far): "
            f"aws sqs list-message-move-tasks --source-arn {source_arn}"
        )
    if state.status == "COMPLETED":
        return f"move task {state.handle} completed: {counted} message(s) moved back to their queue"
    reason = f": {state.failure}" if state.failure else ""
    return f"move task {state.handle} ended {state.status} after {counted} message(s){reason}"


def follow(
    sqs: Any,
    queue_url: str,
    handle: str,
    console: Console,
    *,
    sleep: Callable[[float], None] = time.sleep,
    interval: float = POLL_SECONDS,
) -> MoveState:
    """Poll the task with a progress bar until it is no longer RUNNING; Ctrl-C stops watching, not the task."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from runbooks.automation.redrive import follow_move_task, queue_arn

    last = MoveState(handle, "UNKNOWN", 0, None)
    interrupted = False
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as bar:
        row = bar.add_task(f"move task {handle}", total=None)

        def show(state: MoveState) -> None:
            nonlocal last
            last = state
            bar.update(row, completed=state.moved, total=state.to_move, description=f"move task: {state.status}")

        try:
            last = watch(handle, follow_move_task(sqs, queue_url, handle, sleep=sleep, interval=interval), show)
        except KeyboardInterrupt:
            interrupted = True
    source_arn = queue_arn(sqs, queue_url) if interrupted or last.running else ""
    console.print(ending_line(last, source_arn, interrupted=interrupted))
    return last
