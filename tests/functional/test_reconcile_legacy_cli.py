"""`pipeops reconcile --legacy-table`: a seed-style plain counter, repaired only on two agreeing runs."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pipeops.cli import app
from tests.conftest import create_pk_table

TABLE = "seed-concurrency"


def counter(resources) -> int:
    item = resources.client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": "workflow_counter"}})["Item"]
    return int(item["active_count"]["N"])


def legacy(resources, state: Path, *extra: str) -> tuple[int, dict]:
    args = ["reconcile", "--json", "--legacy-table", TABLE, "--state-machine-arn", resources.state_machine_arn,
            "--state-file", str(state), "--grace-seconds", "0", *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.output)["data"]


def test_a_stalled_plain_counter_is_remembered_then_repaired_conditionally(resources, tmp_path) -> None:
    ddb = resources.client("dynamodb")
    create_pk_table(ddb, TABLE)
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "workflow_counter"}, "active_count": {"N": "3"}})
    state = tmp_path / "legacy.json"

    code, first = legacy(resources, state, "--apply")
    assert code == 1 and first["verdict"] == "remember" and counter(resources) == 3

    code, dry = legacy(resources, state)
    assert code == 1 and dry["verdict"] == "repair" and dry["applied"] is None and counter(resources) == 3

    code, applied = legacy(resources, state, "--apply")
    assert code == 0 and applied["verdict"] == "repair" and applied["applied"] is True
    assert counter(resources) == 0

    code, after = legacy(resources, state, "--apply")
    assert code == 0 and after["verdict"] == "in_sync"


def test_a_counter_that_moves_between_runs_is_left_alone(resources, tmp_path) -> None:
    ddb = resources.client("dynamodb")
    create_pk_table(ddb, TABLE)
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "workflow_counter"}, "active_count": {"N": "2"}})
    state = tmp_path / "legacy.json"
    legacy(resources, state, "--apply")
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "workflow_counter"}, "active_count": {"N": "1"}})  # a router
    code, moved = legacy(resources, state, "--apply")
    assert code == 1 and moved["verdict"] == "changing" and counter(resources) == 1
