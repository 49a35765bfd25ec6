"""The metric catalog is the one source of metric names: code emits only from it, docs come from it."""

from __future__ import annotations

import ast
from pathlib import Path

from pipeline.stack import Function
from pipeline.telemetry.aws_catalog import AWS_CATALOG
from pipeline.telemetry.catalog import CATALOG, Metric, render_markdown
from pipeline.telemetry.units import Unit

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


def metrics_named_in(module_path: Path) -> set[Metric]:
    tree = ast.parse(module_path.read_text(encoding="utf-8"))
    return {
        Metric[node.attr]
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Metric"
        and node.attr in Metric.__members__
    }


def test_each_metric_names_exactly_the_functions_whose_handler_emits_it() -> None:
    """The catalog's `emitters` are what alarms and dashboards put in the `function` dimension: a
    metric listed for a function that never emits it is an alarm that can never fire."""
    from stack.template import load_template

    resources = load_template()["Resources"]
    emitted: dict[Metric, set[str]] = {metric: set() for metric in Metric}
    for function in Function:
        handler = resources[function.value]["Properties"]["Handler"]
        module = ROOT / (handler.rsplit(".", 1)[0].replace(".", "/") + ".py")
        for metric in metrics_named_in(module):
            emitted[metric].add(function.value)
    declared = {metric: {f.value for f in CATALOG[metric].emitters} for metric in Metric}
    assert emitted == declared


def test_every_aws_metric_names_a_dimension_of_its_resource_kind() -> None:
    for (kind, name), spec in AWS_CATALOG.items():
        assert spec.kind is kind and spec.name == name
        assert spec.namespace.startswith("AWS/") and spec.dimension
        assert spec.description.endswith(".")
