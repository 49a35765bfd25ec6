"""The metric catalog is the one source of metric names: code emits only from it, docs come from it."""

from __future__ import annotations

import ast
from pathlib import Path

from pipeline.telemetry.catalog import CATALOG, Metric, Unit, render_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_every_metric_name_has_one_complete_definition() -> None:
    assert set(CATALOG) == set(Metric)
    for metric, spec in CATALOG.items():
        assert spec.name == metric
        assert isinstance(spec.unit, Unit)
        assert spec.description.endswith(".")
        assert "job_id" not in spec.dimensions


def test_the_metrics_doc_is_generated_from_the_catalog() -> None:
    assert (ROOT / "docs" / "METRICS.md").read_text(encoding="utf-8") == render_markdown(), (
        "docs/METRICS.md is stale: run `python -m pipeline.telemetry.catalog`"
    )


def test_no_code_adds_a_metric_except_through_the_catalog() -> None:
    offenders = []
    for path in (ROOT / "pipeline").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in {"add_metric", "put_metric_data"}:
                offenders.append(str(path.relative_to(ROOT)))
    assert set(offenders) == {"pipeline/telemetry/metrics.py"}
