"""`pipeops demo --sidecar`: the sidecar beside a pipeline we did not build, in an in-process sandbox.

The example counter pipeline (examples/counter-pipeline: a sender, a processor with the plain
counter, its workflow and queue) is deployed as its own stack, then the template `pipeops sidecar
build` makes from its pipeops.toml beside it. Then that pipeline's known failure: the processor dies
after its increment and before StartExecution as often as there are slots, so the counter sits at the
max with nothing running and every later document waits. The sidecar's SlotsFullIdle pages, its
scheduled reconciler (legacy mode: two agreeing observations a grace window apart) sets the counter to
the executions running, with an audit record, the stalled documents run, never more than the max at
once, and every alarm of the sidecar returns to OK.

Virtual time runs at 0.02 (a reconciler period of a virtual minute is 1.2 real seconds); the handlers
read the real clock, so the grace window is 10 real seconds.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stack.template import PROJECT_ROOT

if TYPE_CHECKING:
    from sandbox.sandbox import Sandbox

EXAMPLE = PROJECT_ROOT / "examples" / "counter-pipeline"
PIPELINE_STACK, SIDECAR_STACK = "counter-pipeline", "counter-sidecar"
WORKFLOW, PROCESSOR, SENDER = "counter-pipeline-workflow", "counter-pipeline-processor", "counter-pipeline-sender"
COUNTER_TABLE, COUNTER_KEY = "counter-pipeline-concurrency", {"counter_id": {"S": "workflow_counter"}}
TIME_SCALE = 0.02
GRACE_SECONDS = "10"  # real seconds: the handlers read the real clock
WAIT_SECONDS = 120.0  # each step's limit (real): past it the demo says what did not happen


@dataclass
class SidecarDemo:
    """What the demo saw, step by step (the JSON of `pipeops demo --sidecar --json`)."""

    max_slots: int = 0
    stalled_counter: int = 0
    stalled_succeeded: int = 0
    paged_after: float | None = None  # real seconds from the stall until SlotsFullIdle was in ALARM
    status_when_paged: dict[str, Any] = field(default_factory=dict)  # `pipeops status` of the sidecar stack
    repair: dict[str, Any] = field(default_factory=dict)  # the sidecar's audit record
    succeeded: int = 0
    most_running_at_once: int = 0
    final_counter: int = -1
    recovered_after: float | None = None  # real seconds from the page until every alarm was OK
    not_ok_after: list[str] = field(default_factory=list)
    seconds: float = 0.0
    violations: list[str] = field(default_factory=list)


def counter(sandbox: Sandbox) -> int:
    item = sandbox.client("dynamodb").get_item(TableName=COUNTER_TABLE, Key=COUNTER_KEY, ConsistentRead=True).get("Item") or {}
    return int(item.get("active_count", {}).get("N", "0"))


def _workflow_arn(sandbox: Sandbox) -> str:
    machines = sandbox.client("stepfunctions").list_state_machines()["stateMachines"]
    return str(next(m["stateMachineArn"] for m in machines if m["name"] == WORKFLOW))


def succeeded(sandbox: Sandbox) -> int:
    sfn = sandbox.client("stepfunctions")
    return len(sfn.list_executions(stateMachineArn=_workflow_arn(sandbox), statusFilter="SUCCEEDED")["executions"])


def most_running_at_once(sandbox: Sandbox) -> int:
    """From every execution's start and stop: the most that ran at one moment (a stop first at a tie)."""
    edges = []
    for execution in sandbox.client("stepfunctions").list_executions(stateMachineArn=_workflow_arn(sandbox))["executions"]:
        edges.append((execution["startDate"], 1))
        if execution.get("stopDate"):
            edges.append((execution["stopDate"], -1))
    running = most = 0
    for _, step in sorted(edges):
        running += step
        most = max(most, running)
    return most


def sidecar_alarms(sandbox: Sandbox) -> dict[str, str]:
    """Every alarm of the sidecar, by name without the stack prefix, and its state."""
    pages = sandbox.client("cloudwatch").get_paginator("describe_alarms").paginate(
        AlarmNamePrefix=f"{SIDECAR_STACK}-", AlarmTypes=["MetricAlarm", "CompositeAlarm"]
    )
    return {
        alarm["AlarmName"].removeprefix(f"{SIDECAR_STACK}-"): alarm["StateValue"]
        for page in pages
        for alarm in page.get("MetricAlarms", []) + page.get("CompositeAlarms", [])
    }


def _send(sandbox: Sandbox, documents: list[str]) -> None:
    import json

    answer = sandbox.client("lambda").invoke(FunctionName=SENDER, Payload=json.dumps({"documents": documents}).encode())
    answer["Payload"].read()


def _until(check: Callable[[], bool], limit: float = WAIT_SECONDS) -> float | None:
    """Real seconds until `check` held, or None when it did not within `limit`."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > limit:
            return None
        time.sleep(0.25)
    return time.monotonic() - start


def deploy_example(sandbox: Sandbox) -> Any:
    """The example pipeline as its own stack, its handlers importable, its queue polled."""
    from sandbox.deploy import deploy

    if str(EXAMPLE / "handlers") not in sys.path:
        sys.path.insert(0, str(EXAMPLE / "handlers"))
    region, endpoint, scale = sandbox.region, sandbox.endpoint_url, sandbox.time_scale
    deployment = deploy(PIPELINE_STACK, template_path=EXAMPLE / "template.yaml", region=region, endpoint_url=endpoint, time_scale=scale)
    assert sandbox.poller is not None
    sandbox.poller.refresh()
    return deployment


def forget_example() -> None:
    """Drop the example's handler modules (another sandbox imports them afresh)."""
    for module in ("counter_sender", "counter_processor"):
        sys.modules.pop(module, None)
    if str(EXAMPLE / "handlers") in sys.path:
        sys.path.remove(str(EXAMPLE / "handlers"))


def deploy_sidecar(sandbox: Sandbox, out_dir: Path, **parameters: str) -> Any:
    """The template `pipeops sidecar build` makes from the example's pipeops.toml, as its own stack
    (a fast schedule and the real-clock grace; `parameters` over them)."""
    from pipeops.sidecar.build import build
    from sandbox.deploy import deploy

    out = out_dir / "sidecar.yaml"
    build(EXAMPLE / "pipeops.toml", out, check=False, code_uri=str(PROJECT_ROOT))
    settings = {"ReconcileSchedule": "rate(1 minute)", "ReconcileGraceSeconds": GRACE_SECONDS, **parameters}
    region, endpoint, scale = sandbox.region, sandbox.endpoint_url, sandbox.time_scale
    return deploy(SIDECAR_STACK, template_path=out, parameters=settings, region=region, endpoint_url=endpoint, time_scale=scale)


def run(sandbox: Sandbox, say: Callable[[str], None]) -> SidecarDemo:
    """The stall, the page, the repair, the recovery; each step checked, a miss a violation."""
    from pipeline.stores.audit import AuditStore
    from pipeops.sidecar.live import status
    from sandbox.faults.specs import CallCrash
    from stack.resources import SidecarStack

    started, seen = time.monotonic(), SidecarDemo()
    with tempfile.TemporaryDirectory() as scratch:
        say("deploying the example pipeline and its sidecar")
        deploy_example(sandbox)
        sidecar = deploy_sidecar(sandbox, Path(scratch))
    stack = SidecarStack.from_outputs(SIDECAR_STACK, dict(sidecar.outputs))
    seen.max_slots = int(status(stack, sandbox.client)["max"])
    say("the processor dies after its increment")
    crash = CallCrash(name="processor-dies", function=PROCESSOR, service="dynamodb", operation="UpdateItem", when="after")
    assert sandbox.faults is not None
    sandbox.faults.inject(crash)
    _send(sandbox, [f"doc-{n}.pdf" for n in range(seen.max_slots)])
    if _until(lambda: counter(sandbox) == seen.max_slots) is None:
        seen.violations.append(f"the counter never reached the max ({counter(sandbox)} of {seen.max_slots})")
    sandbox.faults.clear("processor-dies")
    _send(sandbox, ["late-1.pdf", "late-2.pdf"])
    stalled_at = time.monotonic()
    seen.stalled_counter, seen.stalled_succeeded = counter(sandbox), succeeded(sandbox)
    say("waiting for the sidecar's SlotsFullIdle")
    seen.paged_after = _until(lambda: sidecar_alarms(sandbox).get("SlotsFullIdle") == "ALARM")
    if seen.paged_after is None:
        seen.violations.append("SlotsFullIdle never went to ALARM")
    seen.status_when_paged = status(stack, sandbox.client)
    total = seen.max_slots + 2
    say("waiting for the scheduled reconciler's repair and the stalled documents")
    if _until(lambda: succeeded(sandbox) == total and counter(sandbox) == 0) is None:
        seen.violations.append(f"{succeeded(sandbox)} of {total} documents ran, the counter at {counter(sandbox)}")
    records = AuditStore(stack.SidecarTableName, sandbox.client("dynamodb")).history(datetime.now(UTC) - timedelta(hours=1)).records
    seen.repair = records[0].to_dict() if records else {}
    if not records:
        seen.violations.append("no repair was audited")
    seen.succeeded, seen.final_counter = succeeded(sandbox), counter(sandbox)
    seen.most_running_at_once = most_running_at_once(sandbox)
    if seen.most_running_at_once > seen.max_slots:
        seen.violations.append(f"{seen.most_running_at_once} ran at once, above the max {seen.max_slots}")
    say("waiting for every alarm of the sidecar to return to OK")
    recovered = _until(lambda: "ALARM" not in sidecar_alarms(sandbox).values() and sidecar_alarms(sandbox).get("SlotsFullIdle") == "OK")
    seen.recovered_after = None if recovered is None else time.monotonic() - stalled_at
    seen.not_ok_after = sorted(name for name, state in sidecar_alarms(sandbox).items() if state == "ALARM")
    if recovered is None:
        seen.violations.append(f"alarms still in ALARM: {', '.join(seen.not_ok_after)}")
    seen.seconds = time.monotonic() - started
    return seen


def print_demo(console: Any, seen: SidecarDemo) -> None:
    """The story, with the numbers of this run."""
    from rich.rule import Rule

    console.print(Rule("the sidecar beside a pipeline we did not build"))
    console.print(
        f"The counter pipeline's processor died after its increment {seen.max_slots} times: counter "
        f"{seen.stalled_counter} of max {seen.max_slots}, nothing running, {seen.stalled_succeeded} documents done; "
        "two more documents wait."
    )
    page = "never" if seen.paged_after is None else f"{seen.paged_after:.1f} s later"
    console.print(f"The sidecar's SlotsFullIdle went to ALARM {page}. `pipeops status --stack-name {SIDECAR_STACK}`:")
    for finding in seen.status_when_paged.get("findings", []):
        console.print(f"  {finding['name']} {finding['target']}: {finding['reason']} (runbook {finding['runbook'] or '-'})")
    if seen.repair:
        console.print(
            f"Its scheduled reconciler repaired it (two agreeing observations): {seen.repair.get('action')} "
            f"{seen.repair.get('target')}, {seen.repair.get('reason')}, by {seen.repair.get('by')}."
        )
    console.print(
        f"Then {seen.succeeded} documents ran, at most {seen.most_running_at_once} at once (max {seen.max_slots}); "
        f"the counter is {seen.final_counter}."
    )
    back = "never" if seen.recovered_after is None else f"{seen.recovered_after:.1f} s after the stall"
    console.print(f"Every alarm of the sidecar back to OK: {back}. The demo took {seen.seconds:.1f} s.")
    if seen.violations:
        console.print("[red]the demo did not go as it should:[/red]\n" + "\n".join(seen.violations))


def run_sidecar_demo(console: Any, *, as_json: bool = False) -> int:
    """Start the sandbox, play the demo, print it (or one JSON envelope); 1 if anything failed."""
    from pipeops import render
    from pipeops.pipeline_sandbox import pipeline_sandbox
    from sandbox.clock import TimeScale

    # The host sandbox's own pipeline stays idle (its reconciler only reports); the example is what runs.
    with pipeline_sandbox(parameters={"ReconcileApply": "false"}, time_scale=TimeScale(TIME_SCALE)) as sandbox:
        if as_json:
            seen = run(sandbox, lambda _text: None)
        else:
            with console.status("sidecar demo", spinner="dots") as shown:
                seen = run(sandbox, lambda text: shown.update(f"sidecar demo: {text}"))
    forget_example()
    if as_json:
        render.emit_json("sidecar_demo", asdict(seen))
    else:
        print_demo(console, seen)
    return 1 if seen.violations else 0
