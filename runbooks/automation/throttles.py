"""`execution-throttled`, `function-throttles`, `dynamodb-throttles`: diagnose only.

Each reads the throttle metric its alarms watch (the last hour) and the settings that cap the
throughput: the stack's parameters (`MaxConcurrentWorkflows`, `RouterMaxConcurrency`), each
function's reserved concurrency (GetFunctionConcurrency), the account's Lambda concurrency,
the tables' billing mode and capacity, and the account quota through Service Quotas where the
endpoint answers. What does not answer (a missing permission, an API moto lacks) is left out and
named under `unreadable`, never an error. `advice` (pure) says which setting to change. Nothing
here writes: the fix is a stack update or a quota request, the operator's.

Verdict: `remains` (exit 1) while the last hour has throttles, `absent` (exit 0) without.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from runbooks.automation.remedy_request import RemedyRequest
from runbooks.automation.result import RunbookResult, Verdict
from runbooks.catalog import Runbook

WINDOW = timedelta(hours=1)
STACK_PARAMETERS = ("MaxConcurrentWorkflows", "RouterMaxConcurrency", "ProcessingMode")
LAMBDA_CONCURRENCY_QUOTA = ("lambda", "L-B99A9384")  # Concurrent executions
TASK_INVOCATIONS_PER_WORKFLOW = 2  # the workflow Map's MaxConcurrency
_TASKS = ("DetectFunctionName", "RedactFunctionName", "GenerateSyntheticFunctionName")


# -- pure: the advice -----------------------------------------------------------------------------


def advice(runbook: Runbook, facts: Mapping[str, Any]) -> list[str]:
    """What to change, from the facts read (missing facts are skipped)."""
    parameters = facts.get("stack_parameters") or {}
    slots = parameters.get("MaxConcurrentWorkflows", "?")
    routers = parameters.get("RouterMaxConcurrency", "?")
    if runbook is Runbook.EXECUTION_THROTTLED:
        return [
            f"Step Functions' StartExecution and state-transition rates are account quotas: lower MaxConcurrentWorkflows "
            f"(now {slots}) or RouterMaxConcurrency (now {routers}) with a stack update, or request a quota increase "
            "(Service Quotas, service `states`)."
        ]
    if runbook is Runbook.FUNCTION_THROTTLES:
        found = [
            f"{name} has a reserved concurrency of {reserved}: remove it (`aws lambda delete-function-concurrency "
            f"--function-name {name}`) or raise it; the template reserves none."
            for name, reserved in (facts.get("reserved_concurrency") or {}).items()
            if reserved is not None
        ]
        account = facts.get("account") or {}
        if account.get("ConcurrentExecutions") is not None:
            found.append(
                f"The account allows {account['ConcurrentExecutions']} concurrent executions "
                f"({account.get('UnreservedConcurrentExecutions', '?')} unreserved); the stack asks up to "
                f"{facts.get('stack_demand', '?')}: lower MaxConcurrentWorkflows (now {slots}, x{TASK_INVOCATIONS_PER_WORKFLOW} "
                f"task invocations each) or RouterMaxConcurrency (now {routers}), or request more (quota {LAMBDA_CONCURRENCY_QUOTA[1]})."
            )
        return found
    tables = facts.get("tables") or {}
    found = []
    for name, table in tables.items():
        if table.get("billing_mode") == "PROVISIONED":
            found.append(f"{name} is PROVISIONED ({table.get('capacity')}): raise its capacity or switch it to PAY_PER_REQUEST.")
        else:
            found.append(
                f"{name} is on-demand: a throttle is a hot key or a burst. The semaphore item takes every admission: "
                f"lower RouterMaxConcurrency (now {routers}) or MaxConcurrentWorkflows (now {slots})."
            )
    return found


def stack_demand(parameters: Mapping[str, str]) -> int | None:
    """Concurrent invocations the stack asks for at most: task invocations and routers."""
    try:
        return int(parameters["MaxConcurrentWorkflows"]) * TASK_INVOCATIONS_PER_WORKFLOW + int(parameters["RouterMaxConcurrency"])
    except (KeyError, ValueError):
        return None


# -- the shell ------------------------------------------------------------------------------------


def run(request: RemedyRequest) -> RunbookResult:
    unreadable: list[str] = []

    def read(what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as exc:  # an API or a permission that is not there: named, not fatal
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", "") or type(exc).__name__
            unreadable.append(f"{what}: {code}")
            return None

    facts: dict[str, Any] = {"stack_parameters": read("stack parameters", lambda: stack_parameters(request)) or {}}
    since = request.clock() - WINDOW
    if request.runbook is Runbook.EXECUTION_THROTTLED:
        dimensions = [("StateMachineArn", request.resources.StateMachineArn)]
        facts["throttles"] = read("metrics", lambda: metric_sums(request, "AWS/States", ["ExecutionThrottled"], dimensions, since))
    elif request.runbook is Runbook.FUNCTION_THROTTLES:
        facts |= function_facts(request, read, since, facts["stack_parameters"])
    else:
        facts |= table_facts(request, read, since)
    facts["unreadable"] = unreadable
    facts["advice"] = advice(request.runbook, facts)
    throttles = facts.get("throttles")
    verdict = Verdict.ABSENT if throttles is not None and not any(_total(throttles)) else Verdict.REMAINS
    return RunbookResult(request.runbook.value, facts, [], [], verdict)


def _total(throttles: Mapping[str, Any]) -> list[float]:
    return [value for value in (throttles or {}).values() if isinstance(value, (int, float)) and value > 0]


def stack_parameters(request: RemedyRequest) -> dict[str, str]:
    stacks = request.client("cloudformation").describe_stacks(StackName=request.resources.stack_name)["Stacks"]
    parameters = {p["ParameterKey"]: p.get("ParameterValue", "") for p in stacks[0].get("Parameters", [])}
    return {name: parameters[name] for name in STACK_PARAMETERS if name in parameters}


def function_facts(
    request: RemedyRequest, read: Callable[[str, Callable[[], Any]], Any], since: datetime, parameters: Mapping[str, str]
) -> dict[str, Any]:
    lambda_client = request.client("lambda")
    names = request.resources.function_names
    reserved = {
        name: read(f"reserved concurrency of {name}", lambda n=name: lambda_client.get_function_concurrency(FunctionName=n))  # type: ignore[misc]  # mypy infers no lambda with a default
        for name in names
    }
    settings = read("account settings", lambda_client.get_account_settings) or {}
    quota = read(
        "Service Quotas",
        lambda: request.client("service-quotas").get_service_quota(ServiceCode=LAMBDA_CONCURRENCY_QUOTA[0], QuotaCode=LAMBDA_CONCURRENCY_QUOTA[1]),
    )
    per_function: dict[str, float] = {}
    for name in names:
        sums = read(f"metrics of {name}", lambda n=name: metric_sums(request, "AWS/Lambda", ["Throttles"], [("FunctionName", n)], since))  # type: ignore[misc]  # mypy infers no lambda with a default
        if sums is not None:
            per_function[name] = sums["Throttles"]
    return {
        "reserved_concurrency": {name: (answer or {}).get("ReservedConcurrentExecutions") for name, answer in reserved.items()},
        "account": dict(settings.get("AccountLimit") or {}),
        "account_quota": (quota or {}).get("Quota", {}).get("Value"),
        "stack_demand": stack_demand(parameters),
        "throttles": per_function if len(per_function) == len(names) else None,
    }


def table_facts(request: RemedyRequest, read: Callable[[str, Callable[[], Any]], Any], since: datetime) -> dict[str, Any]:
    dynamodb = request.client("dynamodb")
    tables: dict[str, Any] = {}
    throttles: dict[str, float] = {}
    for name in (request.resources.TrackingTableName, request.resources.CoordinationTableName):
        described = read(f"table {name}", lambda n=name: dynamodb.describe_table(TableName=n)["Table"])  # type: ignore[misc]  # mypy infers no lambda with a default
        if described is not None:
            tables[name] = table_summary(described)
        sums = read(
            f"metrics of {name}",
            lambda n=name: metric_sums(request, "AWS/DynamoDB", ["ReadThrottleEvents", "WriteThrottleEvents"], [("TableName", n)], since),  # type: ignore[misc]  # mypy infers no lambda with a default
        )
        if sums is not None:
            throttles |= {f"{name} {metric}": value for metric, value in sums.items()}
    limits = read("account limits", dynamodb.describe_limits) or {}
    return {
        "tables": tables,
        "account_limits": {k: v for k, v in limits.items() if k != "ResponseMetadata"},
        "throttles": throttles if len(throttles) == 4 else None,
    }


def table_summary(table: Mapping[str, Any]) -> dict[str, Any]:
    """Billing mode and capacity of a table and its indexes, as DescribeTable says."""
    mode = (table.get("BillingModeSummary") or {}).get("BillingMode") or "PROVISIONED"
    throughput = table.get("ProvisionedThroughput") or {}
    return {
        "billing_mode": mode,
        "capacity": {k: throughput.get(k) for k in ("ReadCapacityUnits", "WriteCapacityUnits")} if mode == "PROVISIONED" else None,
        "on_demand_max": dict(table.get("OnDemandThroughput") or {}) or None,
        "indexes": [index["IndexName"] for index in table.get("GlobalSecondaryIndexes", [])],
    }


def metric_sums(
    request: RemedyRequest, namespace: str, metrics: Sequence[str], dimensions: Sequence[tuple[str, str]], since: datetime
) -> dict[str, float]:
    """The sum of each metric since `since` (0 when CloudWatch has no datapoint)."""
    queries = [
        {
            "Id": f"m{i}",
            "MetricStat": {
                "Metric": {"Namespace": namespace, "MetricName": metric, "Dimensions": [{"Name": n, "Value": v} for n, v in dimensions]},
                "Period": 300,
                "Stat": "Sum",
            },
        }
        for i, metric in enumerate(metrics)
    ]
    answer = request.client("cloudwatch").get_metric_data(MetricDataQueries=queries, StartTime=since, EndTime=request.clock())
    values = {result["Id"]: sum(result.get("Values", [])) for result in answer.get("MetricDataResults", [])}
    return {metric: float(values.get(f"m{i}", 0.0)) for i, metric in enumerate(metrics)}
