"""Every `pipeops` command against a sidecar stack (`--stack-name` of `pipeops sidecar build`'s stack),
in the sandbox beside the example counter pipeline: status, reconcile (dry run, --apply, --history)
and alarms read what the sidecar watches; the commands that need the reference pipeline's own tables
say so in one line and exit 2."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeops.cli import app
from pipeops.sidecar.demo import SIDECAR_STACK, counter, deploy_sidecar, succeeded
from runbooks.catalog import Runbook
from tests.conftest import envelope, eventually
from tests.e2e.test_ssm_documents_sandbox import start_document

pytestmark = pytest.mark.slow

DLQ = "counter-pipeline-docs-dlq"


def dlq_depth(sandbox: Any) -> int:
    sqs = sandbox.client("sqs")
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = sqs.get_queue_attributes(QueueUrl=sqs.get_queue_url(QueueName=DLQ)["QueueUrl"], AttributeNames=names)
    return sum(int(value) for value in attributes["Attributes"].values())


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, [*args, "--stack-name", SIDECAR_STACK])


def test_status_reconcile_and_alarms_read_the_watched_pipeline(counter_example: Any, tmp_path: Path) -> None:
    sandbox = counter_example
    deployed = deploy_sidecar(sandbox, tmp_path, ReconcileApply="false")  # the schedule only reports: the CLI repairs
    sqs, dynamodb = sandbox.client("sqs"), sandbox.client("dynamodb")
    sqs.send_message(QueueUrl=sqs.get_queue_url(QueueName=DLQ)["QueueUrl"], MessageBody='{"document": "x.pdf"}')
    # The seed's drift: three increments whose processors died, nothing running.
    dynamodb.put_item(
        TableName="counter-pipeline-concurrency",
        Item={"counter_id": {"S": "workflow_counter"}, "active_count": {"N": "3"}},
    )

    def alarm_states() -> dict[str, str]:
        listed = cli("alarms", "list", "--json")
        return {row["name"].removeprefix(f"{SIDECAR_STACK}-"): row["state"] for row in envelope(listed.output, "alarms")}

    eventually(lambda: alarm_states().get("SlotsFullIdle") == "ALARM", "the sidecar's SlotsFullIdle in ALARM", timeout=300)
    listed = cli("alarms", "list", "--json")
    assert listed.exit_code == 1  # an alarm in ALARM
    rows = {row["name"].removeprefix(f"{SIDECAR_STACK}-"): row for row in envelope(listed.output, "alarms")}
    assert rows["SlotsFullIdle"]["runbook"] == "slots-full-idle"
    assert {"CounterDrift", "ReconcilerSilent", "CounterPipelineDocsDlqNotEmpty", "CounterPipelineProcessorErrors"} <= set(rows), sorted(rows)
    # Each alarm names its runbook, from the sidecar's own build (the composite names none).
    assert rows["CounterPipelineDocsDlqNotEmpty"]["runbook"] == "dlq-messages"
    assert rows["CounterPipelineProcessorErrors"]["runbook"] == "function-errors"
    assert [name for name, row in rows.items() if not row["runbook"]] == ["PipelineUnhealthy"]
    checked = cli("alarms", "check", "--json")
    # The evaluator replays the sidecar's metric alarms on the in-process sandbox's virtual clock (far
    # ahead of the wall clock: its periods are virtual minutes); its verdicts are approximate there, as
    # the samples it places in virtual time are whole real seconds apart, 50 virtual seconds.
    replayed = {row["name"].removeprefix(f"{SIDECAR_STACK}-"): row for row in envelope(checked.output, "alarm_checks")}
    assert checked.exit_code in (0, 1) and replayed["SlotsFullIdle"]["state"] == "ALARM"
    assert replayed["SlotsFullIdle"]["runbook"] == "slots-full-idle" and replayed["SlotsFullIdle"]["datapoints"]
    newest = max(datetime.fromisoformat(point["period_start"]) for point in replayed["SlotsFullIdle"]["datapoints"])
    assert newest > datetime.now(UTC) + timedelta(minutes=2), replayed["SlotsFullIdle"]  # judged in virtual time
    assert all(row["runbook"] for row in replayed.values()), replayed

    drawn = cli("dashboard", "render", "--out", str(tmp_path / "sidecar.html"), "--json")
    assert drawn.exit_code == 0, drawn.output
    page = envelope(drawn.output, "dashboard_render")
    assert (page["dashboard"], page["source"]) == (f"{SIDECAR_STACK}-operations", "deployed")
    assert page["charts_with_data"] > 0 and page["alarms"].get("ALARM", 0) >= 1, page
    assert f"{SIDECAR_STACK}: operations" in (tmp_path / "sidecar.html").read_text(encoding="utf-8")

    stalled = cli("runbook", "run", "slots-full-idle", "--json")  # a dry run: the document's diagnosis
    assert stalled.exit_code == 1, stalled.output
    answer = envelope(stalled.output, "runbook")
    assert (answer["verdict"], answer["evidence"]["active_count"]) == ("remains", "3"), answer
    carried = cli("runbook", "run", "executions-failed")
    assert carried.exit_code == 2, carried.output
    assert "carries counter-drift, slots-full-idle, backlog-stalled, dlq-messages" in " ".join(carried.output.split())

    status = cli("status", "--json")
    assert status.exit_code == 1, status.output
    seen = envelope(status.output, "sidecar_status")
    assert (seen["counter"], seen["max"], seen["running_executions"]) == (3, 3, 0)
    assert seen["dead_letter_queues"] == {DLQ: 1}
    names = {finding["name"] for finding in seen["findings"]}
    assert {"SlotsFullIdle", "DeadLetterQueueMessages"} <= names, seen["findings"]
    # The alarm is fed by the scheduled reconciler's runs: on a starved CPU a run can come late, the
    # alarm's newest period has no data for a moment and ReconcilerSilent fires instead. Asked again,
    # status shows it once the next run reports (the finding above never depends on the schedule).
    eventually(
        lambda: "SlotsFullIdle" in envelope(cli("status", "--json").output, "sidecar_status")["alarms_firing"],
        "status to list SlotsFullIdle among the alarms firing",
        timeout=300,
    )

    dry = cli("reconcile", "--json")
    assert dry.exit_code == 1, dry.output
    found = envelope(dry.output, "reconcile")
    assert found["observed"]["active_count"] == 3 and found["observed"]["running_executions"] == 0
    assert found["verdict"] in ("remember", "repair") and found["dry_run"] and found["applied"] is None
    assert counter(sandbox) == 3  # a dry run writes nothing (and the schedule only reports)

    def repaired() -> bool:
        cli("reconcile", "--apply", "--json")  # two agreeing observations a grace window apart
        return counter(sandbox) == 0

    eventually(repaired, "the counter set to the executions running by `pipeops reconcile --apply`", timeout=120)
    history = envelope(cli("reconcile", "--history", "--since", "1h", "--json").output, "reconcile_history")
    [record] = history["records"]
    assert record["action"] == "set_count" and record["target"] == "counter-pipeline-concurrency/workflow_counter"
    assert cli("reconcile", "--release", "some-holder").exit_code == 2

    # The DLQ: counted by a dry run, moved back to its source queue by SQS with --apply, then processed.
    counted = cli("runbook", "run", "dlq-messages", "--json")
    assert counted.exit_code == 1 and envelope(counted.output, "runbook")["evidence"] == {DLQ: "1"}, counted.output
    # The sidecar's dlq-messages document (its RunbookFunction): a dry run by default, then approved.
    on_sidecar = SimpleNamespace(deployment=deployed, client=sandbox.client)
    documented = start_document(on_sidecar, Runbook.DLQ_MESSAGES)
    assert documented.steps == ["diagnose", "applyOrEnd"] and dlq_depth(sandbox) == 1
    assert (documented.outputs["diagnose.evidence"], documented.outputs["diagnose.exit_code"]) == ({DLQ: "1"}, 1)
    moved = start_document(on_sidecar, Runbook.DLQ_MESSAGES, DryRun=False, Groups=[DLQ])
    assert moved.steps[-1] == "apply" and (moved.outputs["apply.verdict"], moved.outputs["apply.exit_code"]) == ("cleared", 0), moved
    eventually(lambda: succeeded(sandbox) == 1 and dlq_depth(sandbox) == 0, "the redriven document processed")
    [redrive] = envelope(cli("runbook", "history", "--since", "1h", "--json").output, "runbook_history")["records"]
    assert (redrive["action"], redrive["target"]) == ("move_back", DLQ) and "RunbookFunction" in redrive["by"], redrive
    assert envelope(cli("runbook", "run", "dlq-messages", "--apply", "--yes", "--json").output, "runbook")["verdict"] == "absent"

    # The workflow's executions (none failed): read from every state machine the sidecar watches.
    failed = cli("failures", "--since", "1h", "--json")
    assert (failed.exit_code, envelope(failed.output, "failures")) == (0, [])

    for command in (["jobs"], ["job", "show", "any"], ["upload", str(tmp_path)]):
        refused = cli(*command)
        assert refused.exit_code == 2, (command, refused.output)
        assert "is the pipeops sidecar of 'counter-pipeline'" in " ".join(refused.output.split()), refused.output
