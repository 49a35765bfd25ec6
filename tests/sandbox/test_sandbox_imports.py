"""The sandbox acts as AWS for any handler code: it imports nothing of the pipeline (the composer,
`pipeops.pipeline_sandbox`, registers the pipeline's hooks)."""

from __future__ import annotations

import ast
from pathlib import Path

SANDBOX = Path(__file__).resolve().parents[2] / "sandbox"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_no_sandbox_module_imports_the_pipeline_or_the_operator_side() -> None:
    offenders = {
        f"{path.relative_to(SANDBOX.parent)}: {name}"
        for path in SANDBOX.rglob("*.py")
        for name in imported_modules(path)
        if name.split(".")[0] in {"pipeline", "monitors", "pipeops", "bench"}
    }
    assert not offenders


def test_the_check_sees_an_import_of_the_pipeline(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from pipeline.handlers import _wiring\n", encoding="utf-8")
    assert "pipeline.handlers" in imported_modules(module)
