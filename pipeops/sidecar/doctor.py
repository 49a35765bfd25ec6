"""`pipeops sidecar doctor`: does every resource the description names exist, as described?

Read only, one check per named field: the queues, the counter's table (and its partition key), the
counter item under its key with a number in its count attribute, each state machine, the max's
function and variable, each watched function (and its timeout, which the duration alarm is built
on), the tracking table. A sidecar built on a wrong name would watch nothing; this names the field
before it is deployed (its reconciler also reports it at its first run, as implausible drift).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from pipeops.sidecar.config import AwsRef, FixedMax, SidecarConfig

Client = Callable[[str], Any]


@dataclass(frozen=True)
class Check:
    field: str  # the description's field: "counter.table"
    resource: str
    ok: bool
    detail: str  # one line: what was found, or what to fix

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", "")) or type(exc).__name__


def _account_arn(client: Client, ref: AwsRef) -> str:
    """A state machine's ARN: as given, or in the caller's account and region."""
    if ref.arn:
        return ref.arn
    identity = client("sts").get_caller_identity()["Arn"]
    partition, account = identity.split(":")[1], identity.split(":")[4]
    region = client("stepfunctions").meta.region_name
    return f"arn:{partition}:states:{region}:{account}:stateMachine:{ref.name}"


def _probe(field: str, ref: AwsRef, look: Callable[[], str]) -> Check:
    try:
        return Check(field, ref.name, True, look())
    except LookupError as exc:  # there, but not as described
        return Check(field, ref.name, False, str(exc))
    except Exception as exc:  # a ClientError: the resource is not there, or not readable
        if not hasattr(exc, "response"):
            raise
        return Check(field, ref.name, False, f"{_code(exc)}: {exc}")


def _queue(client: Client, field: str, ref: AwsRef) -> Check:
    def look() -> str:
        owner = {"QueueOwnerAWSAccountId": ref.arn.split(":")[4]} if ref.arn else {}
        url = client("sqs").get_queue_url(QueueName=ref.name, **owner)["QueueUrl"]
        return f"queue {url}"

    return _probe(field, ref, look)


def _counter(client: Client, config: SidecarConfig) -> list[Check]:
    counter = config.counter
    table = _probe("counter.table", counter.table, lambda: _table_key(client, counter.table, counter.key_name))
    if not table.ok:
        return [table]
    item = client("dynamodb").get_item(
        TableName=counter.table.name, Key={counter.key_name: {"S": counter.key_value}}, ConsistentRead=True
    ).get("Item")
    where = f"{counter.key_name} = {counter.key_value}"
    if item is None:
        found = Check("counter.key_value", counter.key_value, False, f"no item {where} in {counter.table.name} (a wrong key?)")
    elif "N" not in item.get(counter.count_attribute, {}):
        found = Check("counter.count_attribute", counter.count_attribute, False, f"item {where} has no number {counter.count_attribute}")
    else:
        found = Check("counter.key_value", counter.key_value, True, f"{counter.count_attribute} = {item[counter.count_attribute]['N']}")
    return [table, found]


def _table_key(client: Client, ref: AwsRef, key_name: str | None) -> str:
    schema = client("dynamodb").describe_table(TableName=ref.name)["Table"]["KeySchema"]
    partition = next(key["AttributeName"] for key in schema if key["KeyType"] == "HASH")
    if key_name is not None and partition != key_name:
        raise LookupError(f"its partition key is {partition}, not {key_name}: fix counter.key_name")
    return f"table, partition key {partition}"


def _function(client: Client, field: str, ref: AwsRef, *, timeout: int | None = None, variable: str | None = None) -> Check:
    def look() -> str:
        config = client("lambda").get_function_configuration(FunctionName=ref.arn or ref.name)
        if timeout is not None and int(config.get("Timeout", 0)) != timeout:
            raise LookupError(f"its timeout is {config.get('Timeout')} s, not {timeout}: the duration alarm would be wrong")
        if variable is not None:
            value = (config.get("Environment") or {}).get("Variables", {}).get(variable)
            if value is None or not str(value).isdigit():
                raise LookupError(f"no whole-number environment variable {variable} (found {value!r})")
            return f"{variable} = {value}"
        return f"function, timeout {config.get('Timeout')} s"

    return _probe(field, ref, look)


def _state_machine(client: Client, field: str, ref: AwsRef) -> Check:
    def look() -> str:
        machine = client("stepfunctions").describe_state_machine(stateMachineArn=_account_arn(client, ref))
        return f"state machine, {str(machine.get('status', 'ACTIVE')).lower()}"

    return _probe(field, ref, look)


def check(config: SidecarConfig, client: Client) -> list[Check]:
    """Every named resource, looked up (read only); each a Check."""
    checks = [_queue(client, "queue.main", config.main_queue)]
    checks += [_queue(client, f"queue.dead_letter[{i}]", ref) for i, ref in enumerate(config.dead_letter_queues)]
    checks += _counter(client, config)
    checks += [_state_machine(client, f"workflow.state_machines[{i}]", ref) for i, ref in enumerate(config.state_machines)]
    if not isinstance(config.counter.max, FixedMax):
        maximum = config.counter.max
        checks.append(_function(client, "counter.max", maximum.function, variable=maximum.variable))
    for i, function in enumerate(config.functions):
        checks.append(_function(client, f"alarms.functions[{i}]", function.ref, timeout=function.timeout_seconds))
    if config.tracking is not None:
        tracking = config.tracking.table
        checks.append(_probe("tracking.table", tracking, lambda: _table_key(client, tracking, None)))
    return checks
