"""The project's repository URL, from its one source: pyproject.toml's `[project.urls] Repository`.

The template's RunbookBaseUrl default (written by `pipeops template build`) and the runbook links
in the generated docs are derived from it. Read from the source tree's pyproject.toml, or, for an
installed copy without one, from the package's metadata (`Project-URL`).
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
URL_LABEL = "Repository"
DISTRIBUTION = "pipeops"


@functools.cache
def repository_url() -> str:
    if PYPROJECT.is_file():
        with PYPROJECT.open("rb") as file:
            return str(tomllib.load(file)["project"]["urls"][URL_LABEL])
    from importlib.metadata import metadata

    for entry in metadata(DISTRIBUTION).get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        if label.strip() == URL_LABEL:
            return str(url).strip()
    raise LookupError(f"no {URL_LABEL} URL in pyproject.toml [project.urls] nor in the installed {DISTRIBUTION}'s metadata")


def runbook_base_url() -> str:
    """The repository's runbooks/ folder on its main branch (no trailing slash)."""
    return f"{repository_url().rstrip('/')}/blob/main/runbooks"
