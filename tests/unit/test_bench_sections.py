"""Benchmark-owned sections of docs/PERFORMANCE.md: replaced in place, appended when absent,
carried over when bench.e2e rewrites the file."""

from __future__ import annotations

import pytest

from bench.sections import block, keep_sections, replace_section, sections

DOC = "# Title\n\nIntro.\n\n<!-- bench:reconcile -->\n## Old\nold numbers\n<!-- /bench:reconcile -->\n\n## After\n\nKept.\n"


def test_replace_section_replaces_only_between_the_markers() -> None:
    text = replace_section(DOC, "reconcile", "## New\nnew numbers\n")
    assert text == (
        "# Title\n\nIntro.\n\n<!-- bench:reconcile -->\n## New\nnew numbers\n<!-- /bench:reconcile -->\n\n## After\n\nKept.\n"
    )
    assert replace_section(text, "reconcile", "## New\nnew numbers") == text  # idempotent


def test_replace_section_appends_a_missing_block() -> None:
    assert replace_section("# Title\n\nBody.\n\n\n", "x", "hello") == (
        "# Title\n\nBody.\n\n<!-- bench:x -->\nhello\n<!-- /bench:x -->\n"
    )
    assert replace_section("", "x", "\nhello\n\n") == "<!-- bench:x -->\nhello\n<!-- /bench:x -->\n"


def test_other_sections_and_similar_names_are_left_alone() -> None:
    text = replace_section(DOC, "reconcile-2", "two")
    assert "old numbers" in text and text.endswith("<!-- bench:reconcile-2 -->\ntwo\n<!-- /bench:reconcile-2 -->\n")
    again = replace_section(text, "reconcile", "one")
    assert "old numbers" not in again and "\ntwo\n" in again


@pytest.mark.parametrize(
    "text",
    [
        "<!-- bench:x -->\nno end\n",
        "no start\n<!-- /bench:x -->\n",
        "<!-- /bench:x -->\n<!-- bench:x -->\n",
        "<!-- bench:x -->\na\n<!-- /bench:x -->\n<!-- bench:x -->\nb\n<!-- /bench:x -->\n",
    ],
)
def test_malformed_markers_raise_instead_of_guessing(text: str) -> None:
    with pytest.raises(ValueError, match="section 'x'"):
        replace_section(text, "x", "body")


@pytest.mark.parametrize("name", ["", "a b", "x-->", "-lead"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="bad section name"):
        replace_section("text", name, "body")


def test_sections_lists_well_formed_blocks_in_order() -> None:
    text = DOC + "\n" + block("b", "B") + "\n<!-- bench:broken -->\n"
    found = sections(text)
    assert list(found) == ["reconcile", "b"]
    assert found["b"] == "<!-- bench:b -->\nB\n<!-- /bench:b -->"


def test_keep_sections_carries_over_what_the_new_text_lacks() -> None:
    new = "# Title\n\nFresh render.\n"
    kept = keep_sections(DOC, new)
    assert kept == (
        "# Title\n\nFresh render.\n\n<!-- bench:reconcile -->\n## Old\nold numbers\n<!-- /bench:reconcile -->\n"
    )
    assert keep_sections(kept, new) == kept  # a second rewrite keeps it exactly once
    newer = replace_section(new, "reconcile", "newer")
    assert keep_sections(DOC, newer) == newer  # the new text's own version wins
    assert keep_sections("", new) == new


def test_the_e2e_benchmark_keeps_other_benchmarks_sections(tmp_path) -> None:
    from bench.e2e import _write_report

    out = tmp_path / "docs" / "PERFORMANCE.md"
    _write_report(out, "# First render\n")
    assert out.read_text() == "# First render\n"
    out.write_text(replace_section(out.read_text(), "reconcile", "reconcile numbers"))
    _write_report(out, "# Second render\n")
    assert out.read_text() == "# Second render\n\n<!-- bench:reconcile -->\nreconcile numbers\n<!-- /bench:reconcile -->\n"
