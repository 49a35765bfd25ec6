"""`pipeops dashboard render` on a sandbox that ran a small workload: the operations dashboard, read
from CloudWatch as deployed, drawn by headless Chromium with data in every chart the workload feeds.

Each chart's series have their own colours (the renderer's palette, by row), so a pixel of one of
them inside the chart's plot rectangle (`dashboards.render.layout`) is a drawn datapoint.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from alarms.catalog import build_catalog
from dashboards.build import operations_body, resolve
from dashboards.metric_rows import expand_metrics
from dashboards.render import CHROMIUM, PALETTE, Box, layout
from pipeops.cli import dashboard_app
from pipeops.dashboard import stack_names, stack_parameters
from stack.resources import Connection
from stack.template import load_template
from tests.browser.png import Image, read_png
from tests.conftest import envelope

# A run of a folder: PII in three files, an unsupported .pdf, an empty file and one that is not
# UTF-8 (a file failure, 1 of 6: under the FileFailureRate alarm's 20%); and a root-level file.
WORKLOAD = {
    "claims/claim-1.txt": b"Claimant bo@corp.example, phone 555-201-3344, SSN 123-45-6789.\n",
    "claims/claim-2.txt": b"Paid to card 4111 1111 1111 1111 from 10.1.2.3; contact al@corp.example.\n",
    "claims/notes.md": b"# notes\nCall 555-987-6543 or mail cy@corp.example.\n",
    "claims/scan.pdf": b"%PDF-1.4 not read",
    "claims/empty.txt": b"",
    "claims/legacy.txt": b"\xff\xfe\x00latin-1 \xe9t\xe9",
    "welcome.txt": b"Welcome! Questions: help@corp.example\n",
}
# Charts that a healthy realtime run cannot fill, and why. The test checks that they stay empty.
NEVER_FED = {
    "TrackingTable: throttles and condition failures": "neither moto nor the sandbox publishes AWS/DynamoDB metrics",
    "CoordinationTable: throttles and condition failures": "neither moto nor the sandbox publishes AWS/DynamoDB metrics",
}
# Charts whose metrics are emitted only when something goes wrong (no zeros are published), so a
# healthy run leaves them empty; not checked either way (a redelivery under load may feed one).
ONLY_ON_TROUBLE = {
    "Executions failed, timed out, aborted": "AWS/States publishes these only for such an execution",
    "Router failures and duplicate deliveries": "the router emits these only for a failed or repeated message",
    "Batch trigger and stale work": "batch trigger never invoked; StaleStatusWrites only for a backwards write",
    "Throttles by function": "AWS/Lambda publishes Throttles only for a throttled invocation",
}
# A single datapoint is a dot of radius 3; at 0 only its upper half is inside the plot, and a "> 0"
# threshold's dashed line runs over it (the dead-letter queues: 8 pixels).
MIN_DATA_PIXELS = 5
_CHART = re.compile(r'<svg class="chart"[^>]*?data-widget="(\d+)" data-series="(\d+)"')


def colours_near(image: Image, box: Box, colours: set[tuple[int, int, int]], tolerance: int = 16) -> int:
    """Pixels inside `box` within `tolerance` of one of `colours` on every channel."""
    return sum(
        count
        for pixel, count in image.colour_counts(box.left, box.top, box.right, box.bottom).items()
        if any(max(abs(a - b) for a, b in zip(pixel, colour, strict=True)) <= tolerance for colour in colours)
    )


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def series_colours(widget: dict[str, Any]) -> set[tuple[int, int, int]]:
    """The colour the renderer gives each drawn row: its own, else the palette's by position."""
    properties = widget["properties"]
    queries = [
        q
        for q in expand_metrics(
            properties["metrics"], stat=properties.get("stat", "Average"), period=properties["period"]
        )
        if q.visible and q.expression is None
    ]
    return {rgb(q.color or PALETTE[position % len(PALETTE)]) for position, q in enumerate(queries)}


def render(out: Path, *extra: str) -> tuple[dict[str, Any], str]:
    result = CliRunner().invoke(
        dashboard_app, ["render", "--out", str(out), "--hours", "0.25", "--json", *extra]
    )
    assert result.exit_code == 0, result.output
    return envelope(result.stdout, "dashboard_render"), result.stderr


def with_data(page: str) -> dict[int, int]:
    return {int(index): int(series) for index, series in _CHART.findall(page)}


@pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"Chromium is not installed at {CHROMIUM} (apt-get install -y --no-install-recommends chromium)",
)
def test_the_operations_dashboard_from_a_sandbox_draws_every_chart_the_workload_feeds(
    make_sandbox: Any, tmp_path: Path
) -> None:
    template = load_template()
    assert "OperationsDashboard" in template["Resources"], (
        "template.yaml lacks the dashboards: `pipeops template build`"
    )
    sandbox = make_sandbox(RedactionMode="synthetic")  # the synthetic-data function runs too
    s3 = sandbox.client("s3")
    for key, content in WORKLOAD.items():
        s3.put_object(Bucket=sandbox.outputs["InputBucketName"], Key=key, Body=content)
    assert sandbox.wait_until_idle(120)
    # The reconciler's metrics (it also runs on its schedule, but maybe not yet). Twice: the heartbeat
    # chart's newest point would sit under its threshold's label at 1, the page's top-right corner.
    for _ in range(2):
        reconciled = sandbox.client("lambda").invoke(
            FunctionName=sandbox.outputs["ReconcilerFunctionName"],
            Payload=json.dumps({"dry_run": True}).encode(),
        )
        assert reconciled["StatusCode"] == 200 and "FunctionError" not in reconciled
    # The runbook function runs only when asked: one dry run feeds its charts.
    asked = sandbox.client("lambda").invoke(
        FunctionName=sandbox.outputs["RunbookFunctionName"],
        Payload=json.dumps({"RunbookId": "dlq-messages", "DryRun": True}).encode(),
    )
    assert asked["StatusCode"] == 200 and "FunctionError" not in asked
    assert sandbox.wait_until_idle(60)  # also flushes the AWS/Lambda metrics of those invocations

    data, stderr = render(tmp_path / "ops.html", "--screenshot", str(tmp_path / "ops.png"))

    # The page draws the deployed body, and that is the body built from the catalogs.
    assert data["source"] == "deployed"
    cloudwatch = sandbox.client("cloudwatch")
    body = json.loads(cloudwatch.get_dashboard(DashboardName=data["dashboard"])["DashboardBody"])
    connection = Connection.resolve(None, None, None)
    resources = connection.resources()
    names = stack_names(resources, stack_parameters(connection, resources.stack_name), "us-east-1", template)
    assert body == resolve(operations_body(build_catalog(template), template), names)
    # the sandbox computes percentiles (sandbox.seams.cloudwatch_reads; raw moto fails on them): none is missing
    assert not any("percentile" in note or "could not compute" in note for note in data["notes"]), data["notes"]

    page = (tmp_path / "ops.html").read_text(encoding="utf-8")
    image = read_png(tmp_path / "ops.png")
    geometry = layout(body, alarm_count=sum(data["alarms"].values()))
    assert (image.width, image.height) == (geometry.width, geometry.height)
    series = with_data(page)
    drawn, empty, problems = [], [], []
    for box in geometry.widgets:
        if box.plot is None:
            continue
        widget = body["widgets"][box.index]
        title = widget["properties"]["title"]
        pixels = colours_near(image, box.plot, series_colours(widget))
        if title in NEVER_FED:
            empty.append(title)
            if series[box.index] or pixels:
                problems.append(
                    f"{title}: expected empty ({NEVER_FED[title]}), has {series[box.index]} series"
                )
        elif title not in ONLY_ON_TROUBLE:
            drawn.append(title)
            if not series[box.index] or pixels < MIN_DATA_PIXELS:
                problems.append(f"{title}: {series[box.index]} series with data, {pixels} data pixels")
    assert not problems, "\n".join(problems)
    assert len(drawn) == len(series) - len(NEVER_FED) - len(ONLY_ON_TROUBLE) >= 20
    assert sorted(empty) == sorted(NEVER_FED)

    # Without a deployed dashboard, the body built from the template for this stack: the same charts.
    cloudwatch.delete_dashboards(DashboardNames=[data["dashboard"]])
    rebuilt, stderr = render(tmp_path / "built.html")
    assert rebuilt["source"] == "built" and "no dashboard pipeops-operations in the stack" in " ".join(
        stderr.split()
    )
    assert {i for i, n in with_data((tmp_path / "built.html").read_text(encoding="utf-8")).items() if n} >= {
        i for i, n in series.items() if n
    }
