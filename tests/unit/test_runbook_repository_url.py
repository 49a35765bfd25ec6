"""The runbook links' base URL has one source, pyproject.toml's [project.urls] Repository: the
template's RunbookBaseUrl default is generated from it (`pipeops template build`)."""

from __future__ import annotations

import tomllib
from email.message import Message
from pathlib import Path

import pytest

from alarms import repository
from alarms.catalog import DEFAULT_RUNBOOK_BASE_URL, RUNBOOK_BASE_PARAMETER
from pipeops.template_build import TemplateBuildError, with_runbook_base_default
from stack.template import load_template

ROOT = Path(__file__).resolve().parents[2]


def test_the_template_default_is_the_repository_runbooks_folder() -> None:
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    assert f"{urls['Repository']}/blob/main/runbooks" == DEFAULT_RUNBOOK_BASE_URL
    assert load_template()["Parameters"][RUNBOOK_BASE_PARAMETER]["Default"] == DEFAULT_RUNBOOK_BASE_URL


def test_the_build_writes_the_default_from_pyproject_over_a_stale_one() -> None:
    text = "Parameters:\n  RunbookBaseUrl:\n    Type: String\n    Default: https://example.org/old/runbooks\n    MaxLength: 256\n"
    built = with_runbook_base_default(text)
    assert built == text.replace("https://example.org/old/runbooks", DEFAULT_RUNBOOK_BASE_URL)
    with pytest.raises(TemplateBuildError, match="RunbookBaseUrl"):
        with_runbook_base_default("Parameters:\n  Other:\n    Type: String\n")


def test_an_installed_copy_reads_the_url_from_its_metadata(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.metadata

    published = Message()
    published["Project-URL"] = "Homepage, https://example.org/home"
    published["Project-URL"] = "Repository, https://example.org/fork/pipeops"
    monkeypatch.setattr(repository, "PYPROJECT", tmp_path / "absent.toml")
    monkeypatch.setattr(importlib.metadata, "metadata", lambda name: published)
    repository.repository_url.cache_clear()
    try:
        assert repository.runbook_base_url() == "https://example.org/fork/pipeops/blob/main/runbooks"
    finally:
        repository.repository_url.cache_clear()
