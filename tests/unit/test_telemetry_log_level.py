"""The pipeline's log level: the one asked for (POWERTOOLS_LOG_LEVEL), not powertools' choice of
Lambda's AWS_LAMBDA_LOG_LEVEL, and never below Lambda's."""

from __future__ import annotations

import logging

import pytest

from pipeline.telemetry.logging import apply_log_level, effective_log_level, logger


@pytest.mark.parametrize(
    ("requested", "lambda_level", "level"),
    [
        ("ERROR", "INFO", logging.ERROR),  # the template's LogLevel ERROR: Lambda held at INFO
        ("WARNING", "INFO", logging.WARNING),
        ("CRITICAL", "INFO", logging.CRITICAL),
        ("DEBUG", "DEBUG", logging.DEBUG),
        ("INFO", None, logging.INFO),  # outside Lambda, or the Text format
        ("DEBUG", "WARN", logging.WARNING),  # below Lambda's level Lambda drops it anyway
        ("debug", "FATAL", logging.CRITICAL),
        (None, None, logging.INFO),
        ("LOUD", "TRACE", logging.INFO),  # unknown: INFO
    ],
)
def test_the_level_asked_for_holds_but_never_below_lambdas(
    requested: str | None, lambda_level: str | None, level: int
) -> None:
    assert effective_log_level(requested, lambda_level) == level


def test_apply_log_level_overrides_powertools_precedence(capsys: pytest.CaptureFixture[str]) -> None:
    before = logging.getLogger(logger.service).level
    try:
        env = {"POWERTOOLS_LOG_LEVEL": "ERROR", "AWS_LAMBDA_LOG_LEVEL": "INFO"}
        assert apply_log_level(env) == logging.ERROR
        logger.info("not this")
        logger.error("this")
        out = capsys.readouterr().out
        assert "not this" not in out and '"message":"this"' in out
    finally:
        logging.getLogger(logger.service).setLevel(before)
