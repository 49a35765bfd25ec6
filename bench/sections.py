"""Sections of docs/PERFORMANCE.md that the benchmarks own. Pure (text in, text out) but `write_section`.

Every benchmark writes its tables between two markers,

    <!-- bench:NAME -->
    ...
    <!-- /bench:NAME -->

with `replace_section`, and leaves the rest of the file alone. Everything outside the markers (the
title, how each bench measures, what the numbers mean) is written by hand: no generator writes
there, so a rerun refreshes the numbers and keeps the analysis. When a rerun changes what a table
shows, the prose beside it is for a person to reread.
"""

from __future__ import annotations

import re
from pathlib import Path

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_BLOCK = re.compile(r"<!-- bench:([A-Za-z0-9][A-Za-z0-9_.-]*) -->\n?.*?<!-- /bench:\1 -->", re.DOTALL)


def start_marker(name: str) -> str:
    return f"<!-- bench:{name} -->"


def end_marker(name: str) -> str:
    return f"<!-- /bench:{name} -->"


def block(name: str, body: str) -> str:
    """The section as it stands in the file: markers, the body without surrounding blank lines."""
    _check(name)
    return f"{start_marker(name)}\n{body.strip(chr(10))}\n{end_marker(name)}"


def replace_section(text: str, name: str, body: str) -> str:
    """`text` with section `name` holding `body`: replaced in place, or appended at the end.

    Raises ValueError when the markers are not one start followed by one end: the file was edited
    by hand, and guessing where the section ends could delete someone's text.
    """
    _check(name)
    start, end = start_marker(name), end_marker(name)
    starts, ends = text.count(start), text.count(end)
    if starts == ends == 0:
        head = text.rstrip("\n")
        return (head + "\n\n" if head else "") + block(name, body) + "\n"
    begin, finish = text.find(start), text.find(end)
    if starts != 1 or ends != 1 or finish < begin:
        raise ValueError(f"section {name!r}: expected one {start} before one {end}")
    return text[:begin] + block(name, body) + text[finish + len(end) :]


def sections(text: str) -> dict[str, str]:
    """{name: block} of every well-formed section in `text`, in the order they appear."""
    return {match.group(1): match.group(0) for match in _BLOCK.finditer(text)}


def write_section(path: Path, name: str, body: str) -> None:
    """Write section `name` of the file at `path` (created if missing), leaving the rest as it is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(replace_section(old, name, body), encoding="utf-8")


def _check(name: str) -> None:
    if not _NAME.match(name):
        raise ValueError(f"bad section name {name!r}: letters, digits, '_', '.', '-'")
