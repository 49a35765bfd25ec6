"""`pipeops metrics`: the metric catalog."""

from __future__ import annotations

from typing import Any

from pipeops import render
from pipeops.commands.common import JsonOption


def metrics_catalog(as_json: JsonOption = False) -> None:
    """List the metric catalog: every metric the pipeline emits, its unit and meaning."""
    from rich.table import Table

    from pipeline.telemetry.catalog import CATALOG, NAMESPACE

    rows: list[dict[str, Any]] = [
        {"name": spec.name.value, "unit": spec.unit.value, "dimensions": list(spec.dimensions), "description": spec.description}
        for spec in CATALOG.values()
    ]
    if as_json:
        render.emit_json("metrics", {"namespace": NAMESPACE, "metrics": rows})
        return
    table = Table(title=f"Metrics in namespace {NAMESPACE}")
    for column in ("name", "unit", "description"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["name"], row["unit"], row["description"])
    render.console.print(table)
