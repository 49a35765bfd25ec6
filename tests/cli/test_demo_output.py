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

import pytest

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


@pytest.mark.slow
def test_a_real_run_exits_0_with_the_readme_sample_shape() -> None:
    env = {**os.environ, "COLUMNS": WIDTH, "TERM": "dumb", "NO_COLOR": "1"}
    env.pop("AWS_ENDPOINT_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "pipeops.cli", "demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert shape(done.stdout) == shape(readme_sample()), done.stdout
