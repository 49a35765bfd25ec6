"""One resource, one name: the stack's Outputs, the functions' environment and moto agree.

moto builds a stack's resources lazily, so a read of the stack racing its creation made a second
tracking table, and the functions wrote to one while the Outputs (and so `pipeops jobs`) named
the other. The deploy now checks this and fails loudly; these tests check it independently on a
deployed sandbox, and the pure check on the shapes the race produced.
"""

from __future__ import annotations

from typing import Any

from sandbox.deploy import naming_conflicts

# Output -> the functions' environment variable that must name the same resource
NAMED_OUTPUTS = {
    "TrackingTableName": "TRACKING_TABLE",
    "CoordinationTableName": "COORDINATION_TABLE",
    "InputBucketName": "INPUT_BUCKET",
    "OutputBucketName": "OUTPUT_BUCKET",
    "MainQueueUrl": "MAIN_QUEUE_URL",
    "StateMachineArn": "STATE_MACHINE_ARN",
}


def existing_names(sandbox: Any) -> dict[str, list[str]]:
    return {
        "table": sandbox.client("dynamodb").list_tables()["TableNames"],
        "bucket": [b["Name"] for b in sandbox.client("s3").list_buckets()["Buckets"]],
        "queue": sandbox.client("sqs").list_queues()["QueueUrls"],
        "function": [f["FunctionName"] for f in sandbox.client("lambda").list_functions()["Functions"]],
        "state machine": [
            m["stateMachineArn"] for m in sandbox.client("stepfunctions").list_state_machines()["stateMachines"]
        ],
    }


def test_every_named_output_is_what_the_functions_use_and_exists_once(sandbox: Any) -> None:
    outputs = sandbox.outputs
    existing = existing_names(sandbox)
    environments = {
        name: sandbox.client("lambda").get_function_configuration(FunctionName=name)["Environment"]["Variables"]
        for name in existing["function"]
    }
    assert len(environments) == 10  # the pipeline's eight, the reconciler and the runbook function

    for output, variable in NAMED_OUTPUTS.items():
        used = {env[variable] for env in environments.values() if variable in env}
        assert used == {outputs[output]}, f"{output} and the functions' {variable} disagree"

    everything = [name for names in existing.values() for name in names]
    for output, value in outputs.items():
        if output.endswith(("TableName", "BucketName", "QueueUrl", "FunctionName", "StateMachineArn")):
            assert everything.count(value) == 1, f"{output} names {value}, which exists {everything.count(value)} times"
            family = value.rsplit("-", 1)[0]
            copies = [name for name in everything if name.rsplit("-", 1)[0] == family]
            assert copies == [value], f"{output}: more than one resource carries its name: {copies}"
    assert sorted(existing["table"]) == sorted([outputs["TrackingTableName"], outputs["CoordinationTableName"]])


TABLE = "pipeops-TrackingTable-NHCIM2KOMK7H"
COPY = "pipeops-TrackingTable-8QW3ZK1LMN0P"
PHYSICAL = {"TrackingTable": TABLE, "MainQueue": "https://sqs.example/123/pipeops-MainQueue-VRCD0WYNPYOV"}
EXISTING = [TABLE, "https://sqs.example/123/pipeops-MainQueue-VRCD0WYNPYOV"]


def test_a_consistent_deployment_has_no_conflicts() -> None:
    references = {"Output TrackingTableName": TABLE, "RouterFunction env TRACKING_TABLE": TABLE, "x env STAGE": "dev"}
    assert naming_conflicts(PHYSICAL, EXISTING, references) == []


def test_a_second_copy_of_a_table_is_a_conflict() -> None:
    problems = naming_conflicts(PHYSICAL, [*EXISTING, COPY], {"Output TrackingTableName": TABLE})
    assert len(problems) == 1 and "TrackingTable: 2 resources" in problems[0]


def test_functions_naming_another_copy_than_the_outputs_is_a_conflict() -> None:
    references = {"Output TrackingTableName": TABLE, "IngestFunction env TRACKING_TABLE": COPY}
    problems = naming_conflicts(PHYSICAL, [*EXISTING, COPY], references)
    assert any("IngestFunction env TRACKING_TABLE" in p for p in problems)


def test_a_missing_resource_is_a_conflict() -> None:
    problems = naming_conflicts(PHYSICAL, EXISTING[1:], {})
    assert problems == ["TrackingTable: 0 resources carry its name in moto: []"]
