"""The repository refers to nothing outside itself, and its citations of the architecture doc hold.

A reader of a clone has the repository and nothing else: design notes kept beside it, or paths of
the machine it was written on, are dead ends to them. `docs/ARCHITECTURE.md` is the project's own
design document; code cites its sections by anchor (`docs/ARCHITECTURE.md#semaphore`), so a
renamed or removed heading must take its citations with it, and a file the doc names must exist.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = "docs/ARCHITECTURE.md"

# Documents and places that are not in the repository. Case-insensitive names of the design notes
# (any "...design" Markdown file; the architecture doc is the one design document we keep), the
# folder they lived in, and absolute paths of a working machine (a URL's path never matches: the
# character before the slash is then part of the URL).
OUTSIDE_PATTERNS: dict[str, re.Pattern[str]] = {
    "design notes outside the repository": re.compile(r"(?i)\b\w*design\.md\b"),
    "moto notes outside the repository": re.compile(r"(?i)\bmoto\.md\b"),
    "the shared folder beside the repository": re.compile(r"\.\./shared\b"),
    "an absolute path of a machine": re.compile(r"(?<![\w.:/-])/(?:work|home|Users|root)/"),
    # The project's issue tracker is not in the repository either: say the fact, not its ticket.
    "an issue of the tracker": re.compile(r"(?i)\bissues? #?[0-9]+\b"),
}
CITATION = re.compile(r"docs/ARCHITECTURE\.md#([A-Za-z0-9_-]+)")
LOCAL_LINK = re.compile(r"\]\(#([A-Za-z0-9_-]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
# A file the doc names in backticks: a repository path with a directory and an extension.
NAMED_FILE = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|md|yaml|yml|json|toml|txt))(?:#[\w-]+)?`")


def outside_references(text: str) -> list[str]:
    """What in `text` points outside the repository, one entry per line and kind."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for kind, pattern in OUTSIDE_PATTERNS.items():
            match = pattern.search(line)
            if match:
                found.append(f"line {number}: {kind}: {match.group(0)!r}")
    return found


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"`|\*\*|__", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading's anchor, repeated headings numbered as GitHub numbers them; fences skipped."""
    seen: Counter[str] = Counter()
    result = set()
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            base = slug(match.group(2))
            result.add(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
    return result


@cache
def tracked_text_files() -> tuple[tuple[str, str], ...]:
    """(path, text) of every tracked file that is text (binary files and undecodable ones skipped)."""
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = []
    for raw in listing.split(b"\0"):
        if not raw:
            continue
        path = raw.decode("utf-8", errors="surrogateescape")
        full = ROOT / path
        if not full.is_file():  # deleted in the work tree, not yet committed
            continue
        data = full.read_bytes()
        if b"\0" in data:
            continue
        try:
            files.append((path, data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return tuple(files)


def citations() -> Iterator[tuple[str, int, str]]:
    """(file, line, anchor) of every citation of a section of the architecture doc."""
    for path, text in tracked_text_files():
        for number, line in enumerate(text.splitlines(), start=1):
            for match in CITATION.finditer(line):
                yield path, number, match.group(1)
            if path == ARCHITECTURE:
                for match in LOCAL_LINK.finditer(line):
                    yield path, number, match.group(1)


def test_the_detectors_catch_what_they_are_for() -> None:
    # Split in the source, so that this file itself holds no reference outside the repository.
    outside = [
        "see DESIGN" ".md §3",
        "(notes/MOTO" ".md, what moto lets through)",
        "the plan in REDESIGN" ".md",
        "read ../" "shared/notes first",
        "written in /" "work/main/pipeline",
        "cd /" "home/someone/pipeops",
        "calls per job (issue " "11): one",
        "see Issue " "#25",
    ]
    inside = [
        "see docs/ARCHITECTURE.md#semaphore",
        "https://docs.aws.amazon.com/lambda/latest/dg/home/index.html",
        "s3://bucket/work/file.txt and prefix work/ or home/",
        "runbooks/dlq-messages.md",
        "the issues it raises, 11 of them",
    ]
    assert all(outside_references(line) for line in outside), [line for line in outside if not outside_references(line)]
    assert not [found for line in inside for found in outside_references(line)]
    assert anchors("# Top\n## Who may give a slot back\n```\n## not a heading\n```\n### `sandbox/` seams\n## Top") == {
        "top",
        "who-may-give-a-slot-back",
        "sandbox-seams",
        "top-1",
    }


def test_no_tracked_file_refers_outside_the_repository() -> None:
    offenders = {path: found for path, text in tracked_text_files() if (found := outside_references(text))}
    assert not offenders, "files that point outside the repository (cite docs/ARCHITECTURE.md#<section>):\n" + "\n".join(
        f"{path}: {entry}" for path, found in sorted(offenders.items()) for entry in found
    )


def test_every_cited_section_of_the_architecture_doc_exists() -> None:
    headings = anchors((ROOT / ARCHITECTURE).read_text(encoding="utf-8"))
    cited = list(citations())
    assert cited, "nothing cites docs/ARCHITECTURE.md: the citation pattern no longer matches"
    missing = [f"{path}:{line}: #{anchor}" for path, line, anchor in cited if anchor not in headings]
    assert not missing, "citations of sections docs/ARCHITECTURE.md does not have:\n" + "\n".join(missing)


def test_readme_links_the_architecture_doc() -> None:
    assert f"]({ARCHITECTURE})" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_files_the_architecture_doc_names_exist() -> None:
    named = NAMED_FILE.findall((ROOT / ARCHITECTURE).read_text(encoding="utf-8"))
    assert named, "the doc names no file: the pattern no longer matches"
    missing = sorted({name for name in named if not (ROOT / name).is_file()})
    assert not missing, f"{ARCHITECTURE} names files that do not exist (moved? update the doc): {missing}"
