"""Each handler loads only what it uses: checked in a fresh interpreter per handler, as a cold start.

A module-set assertion, never a time (bench/imports.py times the same imports). `MUST_NOT_LOAD` in
bench.imports says which heavy modules each handler has no use for.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.imports import (
    AWS_METRICS,
    HANDLERS,
    MUST_NOT_LOAD,
    OTEL_SDK,
    PII,
    POWERTOOLS_BATCH,
    S3_EVENTS,
    Probe,
    clean_env,
    fill_bytecode,
    probe,
    rows,
)


@pytest.mark.parametrize("handler", HANDLERS)
def test_a_handler_loads_no_heavy_module_it_does_not_use(handler: str) -> None:
    loaded = set(probe(handler).loaded)
    assert not loaded & set(MUST_NOT_LOAD[handler]), f"{handler} loads {sorted(loaded & set(MUST_NOT_LOAD[handler]))}"


def test_the_policy_keeps_the_pii_detector_from_the_functions_that_never_read_a_file() -> None:
    for handler in ("pipeline.handlers.router", "pipeline.handlers.ingest", "pipeline.handlers.workflow_tracker"):
        assert set(PII) <= set(MUST_NOT_LOAD[handler])
    assert all(set(OTEL_SDK) <= set(modules) for modules in MUST_NOT_LOAD.values())
    assert set(POWERTOOLS_BATCH).isdisjoint(MUST_NOT_LOAD["pipeline.handlers.router"])
    # Only ingest parses S3 events; the tracking store imports the parser for object claims only.
    assert set(S3_EVENTS).isdisjoint(MUST_NOT_LOAD["pipeline.handlers.ingest"])
    assert all(set(S3_EVENTS) <= set(MUST_NOT_LOAD[h]) for h in HANDLERS if h != "pipeline.handlers.ingest")
    # The AWS-native metrics are read by alarms, dashboards and docs, never by a handler.
    assert all(set(AWS_METRICS) <= set(modules) for modules in MUST_NOT_LOAD.values())


def test_the_probe_sees_what_a_handler_does_load() -> None:
    """The check above can fail: detect uses the detector, and an exporter brings the SDK in."""
    assert "pipeline.pii" in probe("pipeline.handlers.detect").loaded
    with_exporter = clean_env() | {"OTEL_TRACES_EXPORTER": "console"}
    assert "opentelemetry.sdk" in probe("pipeline.handlers.router", env=with_exporter).loaded
    assert "pipeline.s3events" in probe("pipeline.handlers.ingest").loaded
    assert "pipeline.telemetry.aws_catalog" in probe("alarms.catalog").loaded


def test_the_timed_imports_read_one_fresh_bytecode_cache_whatever_the_checkout_holds(tmp_path: Path) -> None:
    """No timed import compiles anything (a stale `.pyc` would add its compile time); with
    `compile_project` every project file the handler loads is compiled, and nothing else."""
    handler = "pipeline.handlers.workflow_tracker"
    fill_bytecode(tmp_path, [handler])
    assert probe(handler, bytecode=tmp_path).compiled == ()
    fill_bytecode(tmp_path, [handler], compile_project=True)
    compiled = probe(handler, bytecode=tmp_path).compiled
    assert "pipeline/handlers/workflow_tracker.py" in compiled and "pipeline/stores/tracking.py" in compiled
    assert all(path.startswith("pipeline/") for path in compiled)


def test_the_goal_row_is_missed_by_a_slow_handler_or_by_one_loading_what_it_does_not_use() -> None:
    def runs(ms: float, *loaded: str) -> list[Probe]:
        return [Probe(baseline=0.1, seconds=ms / 1000, loaded=loaded)] * 7

    fast = {handler: runs(30) for handler in HANDLERS}
    [row] = rows(fast)
    assert row.met and row.now.startswith("+30 ms")
    [slow] = rows(fast | {"pipeline.handlers.router": runs(75)})
    assert not slow.met and slow.now == "+75 ms (worst: router)"
    [heavy] = rows(fast | {"pipeline.handlers.router": runs(30, "pipeline.pii")})
    assert not heavy.met and "router: pipeline.pii" in heavy.detail
