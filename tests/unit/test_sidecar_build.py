"""`pipeops sidecar build`: the sidecar's SAM template from a pipeline's description. It lints, it
transforms offline, its alarms are the catalog's (no second copy), and its IAM reaches only the named
resources: reads of their queue and executions, conditional writes to the one counter item."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint
from typer.testing import CliRunner

from alarms.catalog import build_catalog
from alarms.cloudformation import alarm_resource
from dashboards.build import known_placeholder, operations_body, placeholders, resolve
from dashboards.limits import problems
from monitors.reconcile import sidecar as sidecar_handler
from pipeline.stack import Function
from pipeops.cli import app
from pipeops.sidecar.build import SidecarBuildError, alarm_specs, build_template, render
from pipeops.sidecar.config import loads, parse
from pipeops.sidecar.dashboard import sections
from sandbox.template import transform
from stack.template import load_template
from tests.unit.test_packaging import IMPORT_CHECK, NOT_RUNTIME, PACKAGES
from tests.unit.test_packaging import build as build_artifact
from tests.unit.test_sidecar_config import EXAMPLE, VALID

REGIONS = ["us-east-1", "eu-west-1"]
WRITES = ("Put", "Update", "Delete", "Send", "Start", "Stop", "Create", "Write", "Invoke")


@pytest.fixture(scope="module")
def sam() -> dict[str, Any]:
    return build_template(loads(EXAMPLE.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def cfn(sam: dict[str, Any]) -> dict[str, Any]:
    return transform(sam, REGIONS[0])


def errors_and_warnings(matches: list[Any]) -> list[str]:
    return [f"{m.rule.id} {m.message} ({m.path})" for m in matches if m.rule.id[0] in "EW"]


def test_the_sam_template_passes_cfn_lint(sam: dict[str, Any]) -> None:
    text = render(sam, "pipeops.toml")
    assert errors_and_warnings(lint(text, config=ManualArgs(regions=REGIONS))) == []


def test_the_transformed_template_passes_cfn_lint(cfn: dict[str, Any]) -> None:
    assert errors_and_warnings(lint(json.dumps(cfn), config=ManualArgs(regions=REGIONS))) == []


def test_it_declares_only_the_sidecars_own_resources(cfn: dict[str, Any]) -> None:
    """Nothing of the watched pipeline is declared (so nothing of it can be changed)."""
    kinds = {resource["Type"] for resource in cfn["Resources"].values()}
    assert kinds <= {
        "AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm", "AWS::CloudWatch::Dashboard", "AWS::DynamoDB::Table", "AWS::Events::Rule",
        "AWS::IAM::Role", "AWS::Lambda::EventInvokeConfig", "AWS::Lambda::Function", "AWS::Lambda::Permission",
        "AWS::Logs::LogGroup", "AWS::SNS::Subscription", "AWS::SNS::Topic", "AWS::SSM::Document",
    }  # fmt: skip
    functions = [logical_id for logical_id, resource in cfn["Resources"].items() if resource["Type"] == "AWS::Lambda::Function"]
    assert sorted(functions) == ["ReconcilerFunction", "RunbookFunction"]  # the reconciler, dlq-messages' redrive
    assert sum(resource["Type"] == "AWS::DynamoDB::Table" for resource in cfn["Resources"].values()) == 1


def test_the_reconciler_runs_the_sidecar_handler_on_its_schedule(sam: dict[str, Any]) -> None:
    function = sam["Resources"]["ReconcilerFunction"]["Properties"]
    module, _, name = function["Handler"].rpartition(".")
    assert module == sidecar_handler.__name__ and callable(getattr(sidecar_handler, name))
    assert function["Events"]["Schedule"]["Properties"]["Schedule"] == {"Ref": "ReconcileSchedule"}
    variables = function["Environment"]["Variables"]
    assert {"COUNTER_TABLE", "COUNTER_KEY_NAME", "COUNTER_KEY_VALUE", "COUNTER_ATTRIBUTE", "STATE_MACHINE_ARNS",
            "MAIN_QUEUE_NAME", "SIDECAR_TABLE", "RECONCILE_APPLY", "RECONCILE_GRACE_SECONDS"} <= set(variables)
    assert variables["RECONCILE_APPLY"] == {"Ref": "ReconcileApply"}  # the report-only switch
    assert (variables["MAX_FUNCTION"], variables["MAX_VARIABLE"]) == ("counter-pipeline-processor", "MAX_CONCURRENT")
    # The environment the handler reads is the one the template writes.
    target = sidecar_handler.SidecarTarget.from_env({k: v if isinstance(v, str) else "1" for k, v in variables.items()})
    assert target.counter.key_value == "workflow_counter" and target.max_function == "counter-pipeline-processor"


def test_the_reconcilers_alarms_are_the_stacks_own_not_a_copy(sam: dict[str, Any]) -> None:
    """The alarms on the reconciler's metrics are the very resources template.yaml carries, in the
    watched pipeline's words; those on a watched resource differ from the stack's also in the
    dimension (a literal, not a Ref)."""
    ours = {spec.logical_id: alarm_resource(spec) for spec in build_catalog(load_template())}
    shared = [logical_id for logical_id in sam["Resources"] if logical_id in ours]
    reconciler = {"CounterDriftAlarm", "CounterBelowRunningAlarm", "SlotsFullIdleAlarm", "BacklogStalledAlarm",
                  "ImplausibleDriftAlarm", "ReconcilerSilentAlarm", "ReconcilerErrorsAlarm", "ReconcilerThrottlesAlarm",
                  "ReconcilerDurationAlarm"}
    assert reconciler | {"ExecutionsFailedAlarm", "ExecutionsTimedOutAlarm"} <= set(shared)
    for logical_id in shared:
        theirs, mine = copy.deepcopy(ours[logical_id]), copy.deepcopy(sam["Resources"][logical_id])
        if logical_id not in reconciler:
            assert mine["Properties"].pop("Dimensions") != theirs["Properties"].pop("Dimensions")
        mine["Properties"].pop("AlarmDescription"), theirs["Properties"].pop("AlarmDescription")
        assert mine == theirs, logical_id


# The reference pipeline's parts and settings, which a pipeline we did not build does not have.
REFERENCE_WORDS = ("router", "tracker", "holder", "QUEUED", "MaxConcurrentWorkflows", "redacted", "drill-down", "file key", "BacklogStall")


def test_the_alarms_speak_of_the_pipeline_described_not_the_reference_one(sam: dict[str, Any]) -> None:
    descriptions = {
        logical_id: resource["Properties"]["AlarmDescription"]["Fn::Sub"]
        for logical_id, resource in sam["Resources"].items()
        if resource["Type"] in ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
    }
    assert {k: [w for w in REFERENCE_WORDS if w in d] for k, d in descriptions.items() if any(w in d for w in REFERENCE_WORDS)} == {}
    assert descriptions["SlotsFullIdleAlarm"].startswith("Every slot is counted taken while no execution of counter-pipeline-workflow runs")
    assert descriptions["CounterDriftAlarm"].startswith("active_count has stayed above the running executions of counter-pipeline-workflow")
    assert "the max (MAX_CONCURRENT of counter-pipeline-processor)" in descriptions["CounterBelowRunningAlarm"]
    assert "`pipeops runbook run dlq-messages`" in descriptions["CounterPipelineDocsDlqNotEmptyAlarm"]
    # The reference pipeline's own alarms keep its words (the same facades, the default wording).
    reference = {spec.logical_id: spec.summary for spec in build_catalog(load_template())}
    assert "router-started execution" in reference["SlotsFullIdleAlarm"] and "QUEUED" in reference["BacklogStalledAlarm"]


def test_the_watched_resources_alarms_name_them_literally(sam: dict[str, Any]) -> None:
    def dimensions(logical_id: str) -> list[dict[str, Any]]:
        return sam["Resources"][logical_id]["Properties"]["Dimensions"]

    assert dimensions("CounterPipelineDocsDlqNotEmptyAlarm") == [{"Name": "QueueName", "Value": "counter-pipeline-docs-dlq"}]
    assert dimensions("CounterPipelineProcessorErrorsAlarm") == [{"Name": "FunctionName", "Value": "counter-pipeline-processor"}]
    arn = {"Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:counter-pipeline-workflow"}
    assert dimensions("ExecutionsFailedAlarm") == [{"Name": "StateMachineArn", "Value": arn}]
    # Each watched function's duration alarm is at 80% of the timeout the description gives.
    assert sam["Resources"]["CounterPipelineProcessorDurationAlarm"]["Properties"]["Threshold"] == 24000


def test_a_function_named_without_its_timeout_gets_no_duration_alarm() -> None:
    ids = [spec.logical_id for spec in alarm_specs(parse(VALID))]
    assert {"SenderErrorsAlarm", "SenderThrottlesAlarm", "ProcessorDurationAlarm"} <= set(ids)
    assert "SenderDurationAlarm" not in ids


def test_several_state_machines_have_their_own_alarms() -> None:
    data = copy.deepcopy(VALID)
    data["workflow"]["state_machines"] = ["intake", "ocr-flow"]
    ids = [spec.logical_id for spec in alarm_specs(parse(data))]
    assert {"IntakeExecutionsFailedAlarm", "OcrFlowExecutionsFailedAlarm"} <= set(ids)


def test_two_resources_giving_one_alarm_id_are_refused() -> None:
    data = copy.deepcopy(VALID)
    data["alarms"]["functions"] = ["doc-sender", "doc_sender"]
    with pytest.raises(SidecarBuildError, match="DocSenderErrorsAlarm"):
        alarm_specs(parse(data))


def test_holders_mode_is_refused_with_what_to_do_instead() -> None:
    data = copy.deepcopy(VALID)
    data["counter"]["holders"] = True
    with pytest.raises(SidecarBuildError, match=r"^counter\.holders: .*plain counter only.*set holders = false"):
        build_template(parse(data))


def statements(cfn: dict[str, Any]) -> list[dict[str, Any]]:
    role = cfn["Resources"]["ReconcilerFunctionRole"]
    return [s for policy in role["Properties"]["Policies"] for s in policy["PolicyDocument"]["Statement"]]


def test_iam_reaches_only_the_named_resources_and_writes_only_the_counter_item(cfn: dict[str, Any]) -> None:
    found = statements(cfn)
    assert all(statement["Resource"] != "*" for statement in found)
    writes = [s for s in found if any(action.split(":")[1].startswith(WRITES) for action in _actions(s))]
    counter = next(s for s in writes if "dynamodb:UpdateItem" in _actions(s))
    assert _actions(counter) == ["dynamodb:GetItem", "dynamodb:UpdateItem"]
    assert counter["Resource"] == {"Fn::Sub": "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/counter-pipeline-concurrency"}
    assert counter["Condition"] == {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["workflow_counter"]}}
    own = [s for s in writes if s is not counter]
    assert all(s["Resource"] == {"Fn::GetAtt": ["SidecarTable", "Arn"]} for s in own)
    reads = {action for s in found if s not in writes for action in _actions(s)}
    assert reads == {"states:ListExecutions", "sqs:GetQueueUrl", "sqs:GetQueueAttributes", "lambda:GetFunctionConfiguration"}


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


def test_the_sidecar_handler_imports_from_the_artifact_the_makefile_builds(sam: dict[str, Any], tmp_path: Path) -> None:
    """`sam build` runs `make build-ReconcilerFunction` for it (the stack's reconciler's artifact):
    the sidecar's handler imports from that artifact alone, nothing of pipeops/ or alarms/."""
    assert sam["Resources"][Function.RECONCILER.value]["Metadata"] == {"BuildMethod": "makefile"}
    artifact = build_artifact(Function.RECONCILER.value, tmp_path / "artifact")
    env = {"PATH": os.environ.get("PATH", ""), "POWERTOOLS_SERVICE_NAME": "pipeops-pipeline"}
    check = [sys.executable, "-I", "-S", "-c", IMPORT_CHECK, str(artifact), sysconfig.get_paths()["purelib"], sidecar_handler.__name__]
    result = subprocess.run(check, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    loaded = {name.split(".")[0] for name in json.loads(result.stdout)}
    assert loaded & {"pipeline", "monitors"} and not loaded & NOT_RUNTIME


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["sidecar", "build", *args])


def test_build_writes_then_check_passes_and_fails_on_a_changed_file(tmp_path: Path) -> None:
    out = tmp_path / "sidecar.yaml"
    result = run_cli("--config", str(EXAMPLE), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8").startswith("# Generated by `pipeops sidecar build` from pipeops.toml")
    assert run_cli("--config", str(EXAMPLE), "--out", str(out), "--check").exit_code == 0
    out.write_text(out.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    assert run_cli("--config", str(EXAMPLE), "--out", str(out), "--check").exit_code == 1
    assert run_cli("--config", str(EXAMPLE), "--out", str(tmp_path / "missing.yaml"), "--check").exit_code == 1
    assert not (tmp_path / "missing.yaml").exists()


def test_a_wrong_field_fails_the_build_with_a_line_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "pipeops.toml"
    config.write_text(EXAMPLE.read_text(encoding="utf-8").replace('table = "counter-pipeline-concurrency"', "table = 7"), encoding="utf-8")
    result = run_cli("--config", str(config), "--out", str(tmp_path / "sidecar.yaml"), "--json")
    assert result.exit_code == 2
    error = json.loads(result.stdout)["data"]
    assert "counter.table: found 7 (an integer); expected a DynamoDB table name or ARN" in error["message"]
    assert not (tmp_path / "sidecar.yaml").exists()


def test_the_operations_dashboard_draws_every_alarm_within_cloudwatchs_limits(sam: dict[str, Any]) -> None:
    """Built by the stack's dashboard builder: every alarm on the chart of its metric, no placeholder
    the template cannot resolve, and a body CloudWatch accepts once CloudFormation substitutes it."""
    config = loads(EXAMPLE.read_text(encoding="utf-8"))
    specs = alarm_specs(config)
    body = operations_body(specs, sam, sections(config), drilldown=False)  # raises on an alarm no chart shows
    names = {name: f"resolved-{name}" for name in placeholders(body)}
    assert problems(resolve(body, names)) == []
    assert all(known_placeholder(name, sam) for name in placeholders(body))
    drawn = [a["label"] for w in body["widgets"] for a in w.get("properties", {}).get("annotations", {}).get("horizontal", [])]
    assert any("CounterDrift" in label for label in drawn) and any("Dlq" in label for label in drawn)
    text = sam["Resources"]["OperationsDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    assert "counter-pipeline-docs" in text and "run-drilldown" not in text


def test_every_metric_of_ours_an_alarm_or_chart_watches_is_one_the_sidecar_emits(sam: dict[str, Any]) -> None:
    """An alarm on a metric the sidecar's reconciler never emits would never fire."""
    emitted = {metric.value for metric in sidecar_handler.EMITTED}
    ours = {spec.watched.name for spec in alarm_specs(loads(EXAMPLE.read_text(encoding="utf-8"))) if spec.watched.namespace == "PipeOps"}
    assert ours and ours <= emitted
    body = sam["Resources"]["OperationsDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    charted = set(re.findall(r'\["PipeOps","([A-Za-z]+)"', body))
    assert charted and charted <= emitted


def test_the_runbooks_documents_run_the_sidecars_reconciler_and_its_redrive(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    documents = {k: v for k, v in sam["Resources"].items() if v["Type"] == "AWS::SSM::Document"}
    run_by = {
        "RunbookDocumentCounterDrift": "ReconcilerFunction", "RunbookDocumentSlotsFullIdle": "ReconcilerFunction",
        "RunbookDocumentBacklogStalled": "ReconcilerFunction", "RunbookDocumentDlqMessages": "RunbookFunction",
    }  # fmt: skip
    assert set(documents) == set(run_by)
    for logical_id, document in documents.items():
        content = document["Properties"]["Content"]
        steps = [step for step in content["mainSteps"] if step["action"] == "aws:invokeLambdaFunction"]
        assert [step["inputs"]["FunctionName"] for step in steps] == [{"Ref": run_by[logical_id]}] * 2
        assert [step["inputs"]["InputPayload"]["DryRun"] for step in steps] == [True, False]
        assert content["parameters"]["DryRun"]["default"] is True  # starting a document changes nothing
    automation = cfn["Resources"]["RunbookAutomationRole"]["Properties"]["Policies"]
    assert [statement["Resource"] for policy in automation for statement in policy["PolicyDocument"]["Statement"]] == [
        [{"Fn::GetAtt": ["ReconcilerFunction", "Arn"]}, {"Fn::GetAtt": ["RunbookFunction", "Arn"]}]
    ]
    started = [v for v in cfn["Resources"].values() if v["Type"] == "AWS::Events::Rule" and "Targets" in v["Properties"]]
    assert not any("dlq-messages" in json.dumps(rule) for rule in started)  # no alarm starts a redrive


def test_the_redrive_reaches_only_the_named_queues_and_its_own_audit(cfn: dict[str, Any]) -> None:
    role = cfn["Resources"]["RunbookFunctionRole"]
    found = [s for policy in role["Properties"]["Policies"] for s in policy["PolicyDocument"]["Statement"]]
    arn = "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:"
    by_resource = {json.dumps(s["Resource"], sort_keys=True): (_actions(s), s.get("Condition")) for s in found}
    assert by_resource == {
        json.dumps([{"Fn::Sub": f"{arn}counter-pipeline-docs-dlq"}]): (
            ["sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:StartMessageMoveTask", "sqs:ReceiveMessage", "sqs:DeleteMessage"], None
        ),
        json.dumps({"Fn::Sub": f"{arn}counter-pipeline-docs"}): (["sqs:GetQueueUrl", "sqs:SendMessage"], None),
        json.dumps({"Fn::GetAtt": ["SidecarTable", "Arn"]}, sort_keys=True): (
            ["dynamodb:PutItem"], {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["audit#runbook#*"]}}
        ),
    }


def test_the_redrive_handler_imports_from_the_artifact_the_makefile_builds(sam: dict[str, Any], tmp_path: Path) -> None:
    """`make build-RunbookFunction` (the stack's runbook Lambda's artifact) holds the redrive's handler."""
    function = sam["Resources"][Function.RUNBOOK.value]
    module = function["Properties"]["Handler"].rpartition(".")[0]
    assert function["Metadata"] == {"BuildMethod": "makefile"}
    artifact = build_artifact(Function.RUNBOOK.value, tmp_path / "artifact")
    env = {"PATH": os.environ.get("PATH", ""), "POWERTOOLS_SERVICE_NAME": "pipeops-pipeline"}
    check = [sys.executable, "-I", "-S", "-c", IMPORT_CHECK, str(artifact), sysconfig.get_paths()["purelib"], module]
    result = subprocess.run(check, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert not {name.split(".")[0] for name in loaded} & (NOT_RUNTIME - PACKAGES[Function.RUNBOOK])
    assert module in loaded and Path(loaded[module]).is_relative_to(artifact)  # its own copy, not this checkout's
