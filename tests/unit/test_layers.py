"""The shape of the code outside tests, read from its source (ast, function-level imports included):
packages import only the packages below them, no modules import each other in a circle, and no
function runs over 80 lines. Each check is a pure function over parsed source, tested first on a
small example it must reject, then on the repository."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from stack.template import PROJECT_ROOT

# Lowest first; a package imports only the ones before it. The product (pipeline) knows nothing of
# what watches or operates it; monitors run in the reconciler Lambda; stack/ is the deployed stack
# as data for the operator side; the runbook catalog is below the alarm catalog that names runbooks
# by it; dashboards draw the alarms; the sandbox deploys the template with its alarms and dashboards;
# the CLI (pipeops) drives all of them, a sandbox included; bench measures everything.
LAYERS = ("pipeline", "monitors", "stack", "runbooks", "alarms", "dashboards", "sandbox", "pipeops", "bench")
# Imports the order allows but the design does not, each with the modules still open to it: the
# sandbox acts as AWS and runs the pipeline's handlers by the names the template gives, so it
# imports nothing of the pipeline but the stack's names written once (pipeline/stack.py).
FORBIDDEN = {("sandbox", "pipeline"): {"pipeline.stack"}}
# (importing module, imported module) let through for now; an entry no longer needed fails the test.
EXCEPTIONS: set[tuple[str, str]] = set()
MAX_FUNCTION_LINES = 80
# Today's longer functions, being split: this list only shrinks (an entry back under the limit fails).
LONG_FUNCTIONS: set[str] = set()


@dataclass(frozen=True)
class Module:
    name: str  # dotted
    path: str  # relative to the project root
    source: str


def modules(root: Path = PROJECT_ROOT) -> list[Module]:
    """Every module of the layered packages (tests are not among them)."""
    found = []
    for package in LAYERS:
        for file in sorted((root / package).rglob("*.py")):
            parts = file.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found.append(Module(name, file.relative_to(root).as_posix(), file.read_text(encoding="utf-8")))
    return found


def imports(module: Module, known: Iterable[str]) -> set[str]:
    """The project modules `module` imports anywhere in its body (a function's, a TYPE_CHECKING
    block's included): `from a.b import c` names `a.b.c` when that is a module, else `a.b`."""
    known = set(known)
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{module.path}:{node.lineno}: relative import; the project uses absolute ones"
            assert node.module is not None
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if submodule in known:
                    found.add(submodule)
                elif node.module in known:
                    found.add(node.module)
    return found - {module.name}


def import_graph(found: Iterable[Module]) -> dict[str, set[str]]:
    found = list(found)
    names = {module.name for module in found}
    return {module.name: imports(module, names) for module in found}


def wrong_way_imports(graph: Mapping[str, set[str]]) -> set[tuple[str, str]]:
    """Imports of a package from a higher layer, or of one FORBIDDEN to it."""
    def rank(name: str) -> int:
        return LAYERS.index(name.partition(".")[0])

    return {
        (importer, imported)
        for importer, targets in graph.items()
        for imported in targets
        if rank(imported) > rank(importer)
        or imported not in FORBIDDEN.get((importer.partition(".")[0], imported.partition(".")[0]), {imported})
    }


def cycles(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def function_lengths(module: Module) -> dict[str, int]:
    """`path:qualified.name` -> lines from `def` to the function's last line, nested ones included."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                lengths[f"{module.path}:{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(module.source), "")
    return lengths


MODULES = modules()
GRAPH = import_graph(MODULES)


# ------------------------------------------------------------------------------- the checks can fail


def test_the_checks_reject_an_upward_import_a_forbidden_one_and_a_cycle() -> None:
    example = import_graph(
        [
            Module("pipeline.a", "pipeline/a.py", "def f():\n    from alarms.b import x\n"),
            Module("alarms.b", "alarms/b.py", "from pipeline import a\n"),
            Module("sandbox.c", "sandbox/c.py", "import pipeline.a\nfrom pipeline.stack import NAME\n"),
            Module("pipeline.stack", "pipeline/stack.py", "NAME = 'n'\n"),
        ]
    )
    assert example["sandbox.c"] == {"pipeline.a", "pipeline.stack"}
    assert example["alarms.b"] == {"pipeline.a"}
    assert wrong_way_imports(example) == {("pipeline.a", "alarms.b"), ("sandbox.c", "pipeline.a")}
    assert cycles(example) == [{"pipeline.a", "alarms.b"}]


def test_the_length_check_counts_a_method_from_def_to_its_last_line() -> None:
    body = "".join(f"        x = {n}\n" for n in range(MAX_FUNCTION_LINES))
    lengths = function_lengths(Module("m", "m.py", f"class C:\n    def f(self):\n{body}"))
    assert lengths == {"m.py:C.f": MAX_FUNCTION_LINES + 1}


# ---------------------------------------------------------------------------------- the repository


def test_every_module_is_in_a_layer() -> None:
    top_level = {path.name for path in PROJECT_ROOT.iterdir() if (path / "__init__.py").exists()}
    assert top_level - {"tests"} == set(LAYERS)


def test_no_package_imports_a_higher_layer_or_a_forbidden_one() -> None:
    wrong = wrong_way_imports(GRAPH)
    assert wrong - EXCEPTIONS == set(), "imports against the layers (lowest first): " + " < ".join(LAYERS)
    assert EXCEPTIONS - wrong == set(), "no longer imported: remove from EXCEPTIONS"


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert cycles(GRAPH) == []


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.path)
def test_no_function_runs_over_the_limit(module: Module) -> None:
    lengths = function_lengths(module)
    long = {name for name, lines in lengths.items() if lines > MAX_FUNCTION_LINES}
    assert long - LONG_FUNCTIONS == set(), f"split these (at most {MAX_FUNCTION_LINES} lines)"
    listed_here = {name for name in LONG_FUNCTIONS if name.startswith(f"{module.path}:")}
    assert listed_here <= long, "back under the limit: remove from LONG_FUNCTIONS"


def test_every_listed_long_function_still_exists() -> None:
    known = {name for module in MODULES for name in function_lengths(module)}
    assert LONG_FUNCTIONS - known == set(), "gone: remove from LONG_FUNCTIONS"
