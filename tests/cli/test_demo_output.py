"""The README's sample of `make demo` has the shape of a real run.

Shape, not content: the sequence of progress bars, section headings, table titles, tables and
paragraphs (each paragraph by its first word), with every number masked. Times, counts, wrapped
lines and table rows may differ between runs; a section added, removed or moved may not.
Regenerate the sample from a real run: `COLUMNS=110 .venv/bin/pipeops demo`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from alarms.live import spec_of
from pipeops.demo import AlarmLine, alarm_lines, all_in, in_alarm, not_ok, others_summary, windows_sentence

ROOT = Path(__file__).resolve().parents[2]
WIDTH = "110"  # the README's sample is printed at this width
TABLE_CHARS = "┏┃┡│├└┌┗┣╇┠╭╰╞╘"
_NUMBER = re.compile(r"\d+(?:[.:]\d+)*")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _mask(text: str) -> str:
    return " ".join(_NUMBER.sub("#", text).split())


def shape(text: str) -> list[tuple[str, str]]:
    """(kind, label) for each part of the demo's output, in order; tables and paragraphs collapsed."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    parts: list[tuple[str, str]] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        following = lines[index + 1].lstrip() if index + 1 < len(lines) else ""
        if not stripped:
            part = ("blank", "")
        elif stripped[0] in TABLE_CHARS:
            part = ("table", "")
        elif "━" in stripped:
            part = ("progress", _mask(stripped.split("━")[0]))
        elif stripped.startswith("─"):
            part = ("heading", _mask(stripped.strip("─ ")))
        elif line.startswith("   ") and following[:1] in ("┏", "┌"):
            part = ("title", _mask(stripped))
        else:
            part = ("text", _mask(stripped.split()[0]))
        previous = parts[-1] if parts else None
        if previous and part[0] in ("table", "text") and previous[0] == part[0]:
            continue  # rows of one table, lines of one paragraph
        parts.append(part)
    return [part for part in parts if part[0] != "blank"]


def readme_sample() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("```text", readme.index("`make demo` starts"))
    return readme[start + len("```text\n") : readme.index("\n```", start)]


def test_the_shape_ignores_numbers_and_wrapping_but_not_a_missing_section() -> None:
    sample = readme_sample()
    renumbered = _NUMBER.sub(lambda m: str(int(m.group().split(".")[0].split(":")[0]) + 7), sample)
    assert shape(renumbered) == shape(sample)
    rewrapped = sample.replace("Paged ", "Paged\n", 1)
    assert shape(rewrapped) == shape(sample)
    without_repair = sample.replace("$ pipeops reconcile --apply", "", 1)
    assert shape(without_repair) != shape(sample)


def test_the_sample_shows_both_acts() -> None:
    parts = shape(readme_sample())
    headings = [label for kind, label in parts if kind == "heading"]
    titles = [label for kind, label in parts if kind == "title"]
    words = [label for kind, label in parts if kind == "text"]
    assert [p for p in parts if p[0] == "progress"] == [
        ("progress", "blackout: files accounted for"),
        ("progress", "synthetic: files accounted for"),
    ]
    assert headings == ["Act #: an incident on the synthetic-mode sandbox, as the on-call person sees it"]
    assert "Alarms in ALARM (pipeops alarms list)" in titles
    assert titles[-2:] == ["Reconcile (dry run: nothing changed)", "Reconcile (applied)"]
    assert {"Paged", "Back", "incident"} <= set(words)


def test_the_incident_reads_alarms_as_alarms_list_does_with_their_runbook_and_first_step(aws: None) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    for name in ("demo-CounterBelowRunning", "demo-CounterDrift", "other-CounterDrift"):
        cloudwatch.put_metric_alarm(
            AlarmName=name, AlarmDescription="Held above running. Runbook: counter-drift. First: `pipeops reconcile`",
            Namespace="PipeOps", MetricName="CounterDrift", Statistic="Minimum", Period=300, EvaluationPeriods=3,
            Threshold=1, ComparisonOperator="GreaterThanOrEqualToThreshold",
        )  # fmt: skip
    cloudwatch.set_alarm_state(AlarmName="demo-CounterDrift", StateValue="ALARM", StateReason="3 of 3")
    lines = alarm_lines(cloudwatch, "demo")
    assert [(line.name, line.state) for line in lines] == [("CounterDrift", "ALARM"), ("CounterBelowRunning", "OK")]
    spec = spec_of("pipeops-CounterDrift", "pipeops")  # the catalog's, not the deployed description's
    assert spec and spec.first_step.startswith("`pipeops reconcile`")
    assert (lines[0].runbook, lines[0].first_step, lines[0].reason) == ("counter-drift", spec.first_step, "3 of 3")
    assert not_ok(lines) == lines[:1]
    assert all_in(lines, ["CounterDrift"], "ALARM") and not all_in(lines, ["CounterDrift", "CounterBelowRunning"], "ALARM")
    assert not all_in(lines, ["Missing"], "OK")  # an alarm the stack lacks is never "in" a state


def test_alarms_left_out_of_the_table_are_a_count_and_those_without_data_are_named() -> None:
    waiting = [AlarmLine("Throttles", "INSUFFICIENT_DATA", "", "", ""), AlarmLine("Drift", "ALARM", "", "", "")]
    assert others_summary(waiting, 40) == "40 other alarm(s) OK; 1 with no data yet (INSUFFICIENT_DATA: Throttles)"
    assert others_summary(waiting[1:], 42) == "42 other alarm(s) OK"


def test_burn_windows_in_alarm_are_said_apart_from_the_alarms_that_notify() -> None:
    """Act 1's unreadable sample file is a missed file: the long burn windows may be in ALARM before
    the incident. They notify no one alone, so "Before" must not list them as alarms in ALARM."""
    lines = [
        AlarmLine("FilesOnTimeSlowBurn30m", "ALARM", "", "", ""),
        AlarmLine("DlqNotEmpty", "ALARM", "", "", ""),
        AlarmLine("CounterDrift", "OK", "", "", ""),
    ]
    assert in_alarm(lines) == (["DlqNotEmpty"], ["FilesOnTimeSlowBurn30m"])
    assert in_alarm(lines[2:]) == ([], [])
    assert "FilesOnTimeSlowBurn30m" in windows_sentence(["FilesOnTimeSlowBurn30m"]) and windows_sentence([]) == ""


@pytest.mark.slow
def test_a_real_run_exits_0_with_the_readme_sample_shape() -> None:
    env = {**os.environ, "COLUMNS": WIDTH, "TERM": "dumb", "NO_COLOR": "1"}
    env.pop("AWS_ENDPOINT_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "pipeops.cli", "demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert shape(done.stdout) == shape(readme_sample()), done.stdout
    # The DLQ's on-call path, not a purge: the runbook's dry run, then its apply parking the poison message.
    flat = " ".join(done.stdout.split())
    assert "pipeops runbook run dlq-messages (dry run): groups 1 malformed_message, plan quarantine 1" in flat, flat
    assert "--apply --yes: quarantine 1: applied; 0 left in the DLQ, verdict cleared" in flat, flat
    assert "malformed_message" in flat.split("Its reason, read from the quarantine queue:")[1]
