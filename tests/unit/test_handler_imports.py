"""Each handler loads only what it uses: checked in a fresh interpreter per handler, as a cold start.

A module-set assertion, never a time (bench/imports.py times the same imports). `MUST_NOT_LOAD` in
bench.imports says which heavy modules each handler has no use for.
"""

from __future__ import annotations

import pytest

from bench.imports import (
    HANDLERS,
    MUST_NOT_LOAD,
    OTEL_SDK,
    PII,
    POWERTOOLS_BATCH,
    Probe,
    clean_env,
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


def test_the_probe_sees_what_a_handler_does_load() -> None:
    """The check above can fail: detect uses the detector, and an exporter brings the SDK in."""
    assert "pipeline.pii" in probe("pipeline.handlers.detect").loaded
    with_exporter = clean_env() | {"OTEL_TRACES_EXPORTER": "console"}
    assert "opentelemetry.sdk" in probe("pipeline.handlers.router", env=with_exporter).loaded


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
