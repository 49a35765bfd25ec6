"""Sections of docs/PERFORMANCE.md that independent benchmarks own. Pure: text in, text out.

A benchmark that is not `bench.e2e` writes its part between two markers,

    <!-- bench:NAME -->
    ...
    <!-- /bench:NAME -->

with `replace_section`, and leaves the rest of the file alone. `bench.e2e` renders the file whole,
so it carries the sections of the file it replaces over with `keep_sections`.
"""

from __future__ import annotations

import re

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


def keep_sections(old: str, new: str) -> str:
    """`new`, plus every section of `old` that `new` lacks (appended, in their order in `old`).

    A section `new` has too is left as `new` has it.
    """
    kept = new
    present = sections(new)
    for name, old_block in sections(old).items():
        if name not in present:
            kept = kept.rstrip("\n") + "\n\n" + old_block + "\n"
    return kept


def _check(name: str) -> None:
    if not _NAME.match(name):
        raise ValueError(f"bad section name {name!r}: letters, digits, '_', '.', '-'")
