"""What `sam build` puts in each function's artifact, checked without the SAM CLI.

Every function is built by the Makefile (`Metadata: BuildMethod: makefile`): `sam build` runs
`make build-<LogicalId>` with ARTIFACTS_DIR set, and that directory is what the function ships.
These tests run the same targets into a temporary ARTIFACTS_DIR with SKIP_DEPS=1 (no pip install:
offline and fast) and check that an artifact holds the runtime package(s) only, that the
handler imports from it alone, and that what the Makefile builds for (Python version, platform)
is the template's Runtime and Architectures and a Python the project supports.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
from functools import cache
from importlib.metadata import distribution, packages_distributions
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from pipeline.stack import Function
from stack.template import PROJECT_ROOT, load_template
from stack.template import functions as template_functions

MAKEFILE = PROJECT_ROOT / "Makefile"

# What each artifact must hold, exactly: its top-level entries (the dependencies come on top
# when SKIP_DEPS is not set). The reconciler needs monitors/reconcile/ and the pipeline it uses.
RUNTIME_PACKAGES = {"pipeline"}
RECONCILER_PACKAGES = {"pipeline", "monitors"}
RECONCILER = Function.RECONCILER
# The runbook Lambda: the runbook automation, the stack's names and the monitors it uses.
RUNBOOK_PACKAGES = {"pipeline", "monitors", "stack", "runbooks"}
RUNBOOK = Function.RUNBOOK
PACKAGES = {RECONCILER: RECONCILER_PACKAGES, RUNBOOK: RUNBOOK_PACKAGES}
# Parts of the repository no function may ship or import.
NOT_RUNTIME = {"sandbox", "pipeops", "stack", "tests", "bench", "samples", "docs", "dashboards", "alarms", "runbooks"}
# Provided by the Lambda Python runtime, deliberately not in requirements.txt.
RUNTIME_PROVIDED = {"boto3", "botocore"}
ARCHITECTURE_PLATFORM = {"arm64": "aarch64", "x86_64": "x86_64"}


@cache
def template() -> dict[str, Any]:
    return load_template()


def functions() -> dict[str, dict[str, Any]]:
    return template_functions(template())


def function_property(logical_id: str, name: str) -> Any:
    """A function's property, or the `Globals.Function` one it inherits."""
    properties = functions()[logical_id].get("Properties", {})
    return properties.get(name, template().get("Globals", {}).get("Function", {}).get(name))


def handler_module(logical_id: str) -> str:
    return function_property(logical_id, "Handler").rpartition(".")[0]


def make_env() -> dict[str, str]:
    """The environment without what a calling make (`make test`) or the shell may have set."""
    skip = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "ARTIFACTS_DIR", "SKIP_DEPS", "PYTHON"}
    return {name: value for name, value in os.environ.items() if name not in skip}


def make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(PROJECT_ROOT), *args],
        capture_output=True,
        text=True,
        env=make_env(),
        timeout=120,
    )


@cache
def make_database() -> str:
    """`make -p`: every variable and rule of the Makefile, with nothing run (`-q`, no target)."""
    return make("-pRrq", "-f", str(MAKEFILE), ":").stdout


def make_variable(name: str) -> str:
    match = re.search(rf"^{name} :?= ?(.*)$", make_database(), re.MULTILINE)
    assert match, f"the Makefile defines no {name}"
    return match.group(1).strip()


def build(logical_id: str, artifacts_dir: Path, bytecode_python: str = "") -> Path:
    """Build one function; `bytecode_python` empty: sources only, whatever this machine has."""
    result = make(
        f"build-{logical_id}", f"ARTIFACTS_DIR={artifacts_dir}", "SKIP_DEPS=1", f"LAMBDA_BYTECODE_PYTHON={bytecode_python}"
    )
    assert result.returncode == 0, result.stderr
    return artifacts_dir


def source_files(root: Path) -> set[str]:
    return {
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every function built once, as `sam build` would (minus the pip install)."""
    root = tmp_path_factory.mktemp("artifacts")
    return {logical_id: build(logical_id, root / logical_id) for logical_id in functions()}


# ------------------------------------------------------------------------------ template <-> make


def test_every_function_is_built_by_the_makefile_from_the_project_root() -> None:
    assert functions()
    for logical_id, resource in functions().items():
        assert resource.get("Metadata", {}).get("BuildMethod") == "makefile", logical_id
        # `sam build` looks for the Makefile in CodeUri: the project root, for every function.
        code_uri = function_property(logical_id, "CodeUri")
        assert isinstance(code_uri, str) and (PROJECT_ROOT / code_uri / "Makefile").resolve() == MAKEFILE


def test_the_makefile_has_a_build_target_for_each_function_and_no_other() -> None:
    targets = set(re.findall(r"^build-([A-Za-z0-9]+):", make_database(), re.MULTILINE))
    assert targets == set(functions())


def test_the_makefile_builds_for_the_template_runtime_and_architecture() -> None:
    runtimes = {function_property(f, "Runtime") for f in functions()}
    architectures = {tuple(function_property(f, "Architectures")) for f in functions()}
    assert len(runtimes) == 1 and len(architectures) == 1, (runtimes, architectures)
    [runtime], [(architecture,)] = runtimes, architectures
    assert runtime == f"python{make_variable('LAMBDA_PYTHON_VERSION')}"
    platform = make_variable("LAMBDA_PLATFORM")
    assert re.fullmatch(r"manylinux[0-9_]+_" + ARCHITECTURE_PLATFORM[architecture], platform), platform


def test_the_runtime_is_a_python_the_project_supports() -> None:
    with open(PROJECT_ROOT / "pyproject.toml", "rb") as stream:
        pyproject = tomllib.load(stream)
    version = make_variable("LAMBDA_PYTHON_VERSION")
    requires = SpecifierSet(pyproject["project"]["requires-python"])
    assert requires.contains(version), (version, str(requires))
    classifiers = pyproject["project"].get("classifiers", [])
    assert f"Programming Language :: Python :: {version}" in classifiers
    # The code is linted for the oldest supported Python, which must not be newer than the runtime.
    target = pyproject["tool"]["ruff"]["target-version"]  # "py311"
    assert (3, int(target[3:])) <= tuple(int(part) for part in version.split("."))


def test_the_dependencies_are_installed_for_the_lambda_platform_not_the_local_python() -> None:
    # A dry run (-n) prints the commands of the real build, pip install included.
    result = make("-n", f"build-{RECONCILER}", "ARTIFACTS_DIR=/nonexistent/artifact")
    assert result.returncode == 0, result.stderr
    [pip] = [line for line in result.stdout.replace("\\\n", " ").splitlines() if " pip install " in line]
    options = pip.split()
    for option, value in {
        "--requirement": "requirements.txt",
        "--target": '"/nonexistent/artifact"',
        "--platform": make_variable("LAMBDA_PLATFORM"),
        "--python-version": make_variable("LAMBDA_PYTHON_VERSION"),
        "--implementation": "cp",
    }.items():
        assert options[options.index(option) + 1] == value, (option, pip)
    assert "--only-binary=:all:" in options, pip


def runtime_python() -> str | None:
    """An interpreter of the Lambda runtime's Python version on this machine, if there is one."""
    version = make_variable("LAMBDA_PYTHON_VERSION")
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [f"python{version}", *sorted(str(p) for p in pyenv_root.glob(f"versions/{version}*/bin/python{version}"))]
    for candidate in candidates:
        try:
            probe = subprocess.run([candidate, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
        except OSError:  # not on PATH
            continue
        if probe.returncode == 0:
            return probe.stdout.strip()
    return None


def test_an_artifact_built_with_the_runtimes_python_ships_unchecked_bytecode_for_it(tmp_path: Path) -> None:
    """Lambda's /var/task is read-only: without bytecode every cold start compiles the sources."""
    python = runtime_python()
    if python is None:
        pytest.skip(f"no python{make_variable('LAMBDA_PYTHON_VERSION')} on this machine")
    artifact = build("RouterFunction", tmp_path / "router", bytecode_python=python)
    tag = "cpython-" + make_variable("LAMBDA_PYTHON_VERSION").replace(".", "")
    sources = sorted(artifact.rglob("*.py"))
    assert sources
    for source in sources:
        compiled = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        assert compiled.is_file(), compiled
        flags = int.from_bytes(compiled.read_bytes()[4:8], "little")
        assert flags == 0b01, f"{compiled}: not hash-based unchecked (PEP 552 flags {flags:#b})"


def test_a_bytecode_python_of_another_version_is_refused(tmp_path: Path) -> None:
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == make_variable("LAMBDA_PYTHON_VERSION"):
        pytest.skip("this interpreter is the runtime's version")
    result = make(
        "build-RouterFunction", f"ARTIFACTS_DIR={tmp_path}", "SKIP_DEPS=1", f"LAMBDA_BYTECODE_PYTHON={sys.executable}"
    )
    assert result.returncode != 0 and "is not Python" in result.stderr
    assert not list(tmp_path.rglob("*.pyc"))


def test_a_build_without_artifacts_dir_refuses_to_run() -> None:
    result = make(f"build-{RECONCILER}", "SKIP_DEPS=1")
    assert result.returncode != 0
    assert "ARTIFACTS_DIR is not set" in result.stderr


# ------------------------------------------------------------------------------------ artifacts


@pytest.mark.parametrize("logical_id", sorted(functions()))
def test_an_artifact_holds_the_runtime_packages_only(artifacts: dict[str, Path], logical_id: str) -> None:
    artifact = artifacts[logical_id]
    expected = PACKAGES.get(Function(logical_id), RUNTIME_PACKAGES)
    assert {entry.name for entry in artifact.iterdir()} == expected
    files = source_files(artifact)
    assert not [p for p in artifact.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]
    assert not {f for f in files if set(Path(f).parts) & (NOT_RUNTIME - expected)}
    # The whole pipeline package, nothing less (a half-copied package fails at import on AWS).
    assert {f for f in files if f.startswith("pipeline/")} == {
        f"pipeline/{f}" for f in source_files(PROJECT_ROOT / "pipeline")
    }
    if logical_id == RECONCILER:
        assert {f for f in files if f.startswith("monitors/")} == {"monitors/__init__.py"} | {
            f"monitors/reconcile/{f}" for f in source_files(PROJECT_ROOT / "monitors" / "reconcile")
        }
    if logical_id == RUNBOOK:
        assert {f for f in files if not f.startswith(("pipeline/", "monitors/reconcile/", "runbooks/automation/"))} == {
            "monitors/__init__.py",
            "monitors/failures.py",
            "runbooks/__init__.py",
            "runbooks/catalog.py",
            "stack/__init__.py",
            "stack/resources.py",
        }
        assert {f for f in files if f.startswith("runbooks/automation/")} == {
            f"runbooks/automation/{f}" for f in source_files(PROJECT_ROOT / "runbooks" / "automation")
        }
    # The handler the template names is in the artifact.
    assert (artifact / (handler_module(logical_id).replace(".", "/") + ".py")).is_file()


def requirement_modules() -> set[str]:
    """Top-level modules of the distributions in requirements.txt (as installed here).

    Their own dependencies are not included: code that imports one directly must declare it."""
    lines = (PROJECT_ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    wanted = {
        canonical(Requirement(line).name) for line in lines if line.strip() and not line.lstrip().startswith("#")
    }
    return {
        module
        for module, dists in packages_distributions().items()
        if any(canonical(dist) in wanted for dist in dists)
    }


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("logical_id", sorted(functions()))
def test_every_import_in_an_artifact_resolves_to_it_the_requirements_or_the_runtime(
    artifacts: dict[str, Path], logical_id: str
) -> None:
    """Static: every absolute import of every module shipped (lazy ones inside functions too)."""
    artifact = artifacts[logical_id]
    shipped = {entry.name for entry in artifact.iterdir()}
    allowed = set(sys.stdlib_module_names) | shipped | requirement_modules() | RUNTIME_PROVIDED
    unresolved: dict[str, set[str]] = {}
    for path in artifact.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.split(".")[0] not in allowed:
                    unresolved.setdefault(path.relative_to(artifact).as_posix(), set()).add(name)
    assert unresolved == {}


# Run in a fresh interpreter that sees the artifact and the installed third-party packages only:
# -I -S: no cwd, no PYTHONPATH, no site (so not the editable install's path hook either).
IMPORT_CHECK = """
import importlib, json, sys
artifact, site_packages, module = sys.argv[1:4]
sys.path[:0] = [artifact, site_packages]
handler = getattr(importlib.import_module(module), "handler", None)
assert callable(handler), f"{module}.handler is not callable"
print(json.dumps({name: getattr(m, "__file__", None) for name, m in list(sys.modules.items())}))
"""


@pytest.mark.parametrize("logical_id", sorted(functions()))
def test_the_handler_imports_from_its_artifact_alone(
    artifacts: dict[str, Path], logical_id: str, tmp_path: Path
) -> None:
    artifact = artifacts[logical_id]
    site_packages = sysconfig.get_paths()["purelib"]
    env = {"PATH": os.environ.get("PATH", ""), "POWERTOOLS_SERVICE_NAME": "pipeops-pipeline"}
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", IMPORT_CHECK, str(artifact), site_packages, handler_module(logical_id)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    loaded: dict[str, str | None] = json.loads(result.stdout)
    top_level = {name.split(".")[0] for name in loaded}
    packages = PACKAGES.get(Function(logical_id), RUNTIME_PACKAGES)
    assert not top_level & (NOT_RUNTIME - packages)
    ours = {name: file for name, file in loaded.items() if name.split(".")[0] in RUNBOOK_PACKAGES}
    assert handler_module(logical_id) in ours
    for name, file in ours.items():
        assert file is not None and Path(file).is_relative_to(artifact), (name, file)
    assert top_level & RUNBOOK_PACKAGES <= packages


# ------------------------------------------------------------------------------- span exporters


def requirement_closure() -> set[str]:
    """requirements.txt's distributions, what they require (markers evaluated here, extras
    off), and the runtime's boto3 with its own: what a function's Python finds on Lambda."""
    lines = (PROJECT_ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    pending = [Requirement(line) for line in lines if line.strip() and not line.lstrip().startswith("#")]
    pending += [Requirement(name) for name in sorted(RUNTIME_PROVIDED)]
    found: set[str] = set()
    while pending:
        requirement = pending.pop()
        name = canonical(requirement.name)
        if name in found:
            continue
        found.add(name)
        for line in distribution(name).requires or []:
            needed = Requirement(line)
            if needed.marker is None or needed.marker.evaluate({"extra": ""}):
                pending.append(needed)
    return found


@pytest.fixture(scope="module")
def lambda_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site directory holding the closure's installed files alone (linked, dist-info included)."""
    site = tmp_path_factory.mktemp("lambda-site")
    for name in sorted(requirement_closure()):
        dist = distribution(name)
        for file in dist.files or []:
            source = Path(str(dist.locate_file(file)))
            target = site / file
            if ".." in file.parts or not source.is_file() or target.exists():
                continue  # scripts outside site-packages, or a file two distributions share
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source)
    return site


def test_the_otlp_exporter_the_template_selects_is_a_lambda_requirement() -> None:
    closure = requirement_closure()
    assert "opentelemetry-exporter-otlp-proto-http" in closure
    assert not closure & {"pytest", "moto", "hypothesis", "typer"}, "test and CLI tools stay out"


@pytest.mark.parametrize("exporter", ["none", "console", "otlp"])
@pytest.mark.parametrize("logical_id", sorted(functions()))
def test_every_handler_imports_with_each_exporter_from_the_requirements_alone(
    artifacts: dict[str, Path], lambda_site: Path, logical_id: str, exporter: str, tmp_path: Path
) -> None:
    """The template's OTEL_TRACES_EXPORTER values: the SDK and exporter load at import, from the
    artifact and requirements.txt's closure only (not this virtualenv's dev packages)."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "POWERTOOLS_SERVICE_NAME": "pipeops-pipeline",
        "OTEL_TRACES_EXPORTER": exporter,
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318",
    }
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", IMPORT_CHECK, str(artifacts[logical_id]), str(lambda_site), handler_module(logical_id)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = json.loads(result.stdout)
    exporter_module = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
    assert (exporter_module in loaded) == (exporter == "otlp")
    assert ("opentelemetry.sdk.trace" in loaded) == (exporter != "none")
