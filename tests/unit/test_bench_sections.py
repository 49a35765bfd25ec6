"""Benchmark-owned sections of docs/PERFORMANCE.md: replaced in place, appended when absent; the
prose outside them, written by hand, is never touched (bench.e2e included)."""

from __future__ import annotations

import pytest

from bench.sections import block, replace_section, sections, write_section

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


def test_write_section_touches_only_its_markers_and_keeps_the_prose_written_by_hand(tmp_path) -> None:
    out = tmp_path / "docs" / "PERFORMANCE.md"
    write_section(out, "e2e", "first numbers")
    assert out.read_text() == "<!-- bench:e2e -->\nfirst numbers\n<!-- /bench:e2e -->\n"
    out.write_text("# Title\n\nProse by hand.\n\n" + out.read_text() + "\nMore prose.\n" + DOC)
    write_section(out, "e2e", "second numbers")
    assert out.read_text() == (
        "# Title\n\nProse by hand.\n\n<!-- bench:e2e -->\nsecond numbers\n<!-- /bench:e2e -->\n\nMore prose.\n" + DOC
    )


def test_the_e2e_benchmark_writes_only_its_section(tmp_path, monkeypatch) -> None:
    from bench import e2e

    out = tmp_path / "PERFORMANCE.md"
    hand_written = DOC.replace("Intro.", "What is slow, by hand.")
    out.write_text(hand_written)
    saved = tmp_path / "results.json"
    saved.write_text('{"meta": {"date": "2026-01-01 00:00 UTC"}, "configs": []}')
    monkeypatch.setattr(e2e.ApiCallCounter, "install", lambda self: self)
    monkeypatch.setattr(e2e.ThreadCpuMeter, "install", lambda self: self)
    assert e2e.main(["--render", str(saved), "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith(hand_written)
    assert "2026-01-01 00:00 UTC" in sections(text)["e2e"]
    assert sections(text)["reconcile"] == sections(DOC)["reconcile"]
