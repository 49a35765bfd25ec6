"""Handler cold import over `import boto3`, and what each handler loads that it does not use.

Every handler module is imported in a fresh interpreter (what a Lambda cold start pays), at least 7
times each, the handlers interleaved. Each interpreter first imports `boto3` alone (the baseline: the
Lambda runtime's own cost, fresh every time), then the handler, each import statement timed inside the
interpreter (start-up excluded): the handler's import is then exactly its cost over `import boto3`,
measured back to back with its baseline, so both see the same load on a shared machine. The row
reports the worst handler's median, each handler's, and boto3's median.

Bytecode is the same for every run: the interpreters read it from a private cache
(`PYTHONPYCACHEPREFIX`) that a first, untimed import of each handler fills, so every module is
loaded from fresh bytecode and no number depends on which `.pyc` files the checkout happens to hold
(with `PYTHONDONTWRITEBYTECODE` set, a file edited since its `.pyc` was written is compiled again
at every import: that was some 20 ms of the router's +65 ms, and any edit moved it).
That is what a function pays whose artifact ships bytecode (the Makefile compiles it when the build
has the runtime's python3.12). `--compile-project` drops the project's own bytecode from that
cache, so its modules are compiled at every import, as in an artifact built without python3.12
(sources only; /var/task is read-only, so nothing is cached between cold starts): the goals table
shows that too, as context.

The same interpreters record which heavy modules each handler loaded; `MUST_NOT_LOAD` says which a
handler has no use for (tests/unit/test_handler_imports.py asserts it without timing anything), and
which project files were compiled rather than read as bytecode.

    .venv/bin/python -m bench.imports [--repeat 9] [--compile-project]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.goal_row import GoalRow

PROJECT_ROOT = Path(__file__).resolve().parent.parent
GOAL_MS = 60.0
REPEAT = 7

# Every function's handler module (template.yaml's `Handler`s).
HANDLERS: tuple[str, ...] = (
    "pipeline.handlers.ingest",
    "pipeline.handlers.router",
    "pipeline.handlers.batch_trigger",
    "pipeline.handlers.workflow_tracker",
    "pipeline.handlers.detect",
    "pipeline.handlers.generate_synthetic",
    "pipeline.handlers.redact",
    "pipeline.handlers.finalize",
    "monitors.reconcile.handler",
)

# Heavy modules, and the handlers that have no use for them (so must not load them). Without an
# exporter no handler imports OpenTelemetry (the API loads when a trace context comes in, the SDK
# only with an exporter); only the router batches SQS records with powertools; only the tasks that
# read or write file contents need the PII detector; only ingest parses S3 events; no handler
# emits an AWS-native metric (only alarms, dashboards and docs read that part of the catalog).
PII = ("pipeline.pii", "phonenumbers", "stdnum")
OTEL_SDK = ("opentelemetry.sdk", "opentelemetry")
POWERTOOLS_BATCH = ("aws_lambda_powertools.utilities.batch",)
S3_EVENTS = ("pipeline.s3events",)
AWS_METRICS = ("pipeline.telemetry.aws_catalog",)
_NOT_PII_TASKS = (
    "pipeline.handlers.ingest",
    "pipeline.handlers.router",
    "pipeline.handlers.batch_trigger",
    "pipeline.handlers.workflow_tracker",
    "monitors.reconcile.handler",
)
# Finalize reads results and writes the account: the entity types, never a detector or generator.
PII_CODE = ("pipeline.pii.offline", "pipeline.pii.comprehend", "pipeline.pii.synthetic", "phonenumbers", "stdnum")
MUST_NOT_LOAD: dict[str, tuple[str, ...]] = {
    handler: OTEL_SDK
    + AWS_METRICS
    + (PII if handler in _NOT_PII_TASKS else ())
    + (PII_CODE if handler == "pipeline.handlers.finalize" else ())
    + (POWERTOOLS_BATCH if handler != "pipeline.handlers.router" else ())
    + (S3_EVENTS if handler != "pipeline.handlers.ingest" else ())
    for handler in HANDLERS
}
WATCHED: tuple[str, ...] = tuple(
    dict.fromkeys(PII + PII_CODE + OTEL_SDK + POWERTOOLS_BATCH + S3_EVENTS + AWS_METRICS)
)

# Runs in the fresh interpreter: time `import boto3`, then the module's import, then say which
# watched modules (or their submodules) are loaded and which project files were compiled from
# source (the loader calls `source_to_code` only when it has no usable bytecode). Prints one JSON line.
_PROBE = """
import json, sys, time
_loader = sys.modules["_frozen_importlib_external"].SourceLoader
_compile, compiled = _loader.source_to_code, []
def _recording(self, data, path, *args, **kwargs):
    compiled.append(str(path))
    return _compile(self, data, path, *args, **kwargs)
_loader.source_to_code = _recording
started = time.perf_counter()
import boto3
baseline = time.perf_counter() - started
started = time.perf_counter()
import {module}
seconds = time.perf_counter() - started
watched = {watched!r}
loaded = sorted(w for w in watched if any(m == w or m.startswith(w + ".") for m in sys.modules))
root = {root!r}
venv = sys.prefix + "/"
compiled = sorted(p[len(root):] for p in compiled if p.startswith(root) and not p.startswith(venv))
print(json.dumps({{"baseline": baseline, "seconds": seconds, "loaded": loaded, "compiled": compiled}}))
"""


@dataclass(frozen=True)
class Probe:
    baseline: float  # seconds `import boto3` took in this interpreter
    seconds: float  # seconds the module's import took after it: its cost over boto3
    loaded: tuple[str, ...]
    compiled: tuple[str, ...] = ()  # project files compiled from source (no usable bytecode)


def clean_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a function with no trace exporter configured (the default deployment)."""
    source = os.environ if env is None else env
    return {name: value for name, value in source.items() if not name.startswith("OTEL_")}


def bytecode_env(cache: Path, env: Mapping[str, str] | None = None, *, write: bool = False) -> dict[str, str]:
    """`env` (default: `clean_env()`) reading bytecode from `cache` only, and writing to it if `write`."""
    found = clean_env() if env is None else dict(env)
    found["PYTHONPYCACHEPREFIX"] = str(cache)
    found.pop("PYTHONDONTWRITEBYTECODE", None)
    if not write:
        found["PYTHONDONTWRITEBYTECODE"] = "1"
    return found


def probe(module: str, env: Mapping[str, str] | None = None, *, bytecode: Path | None = None) -> Probe:
    """Import boto3 then `module` in a fresh interpreter: both times and the watched modules loaded.

    With `bytecode`, every module's bytecode is read from that cache (`fill_bytecode`), never the
    checkout's `__pycache__`; without it, whatever the environment says.
    """
    source = PROJECT_ROOT.as_posix() + "/"
    if bytecode is not None:
        env = bytecode_env(bytecode, env)
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE.format(module=module, watched=WATCHED, root=source)],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env=clean_env() if env is None else dict(env),
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"importing {module} failed: {completed.stderr.strip()[-500:]}")
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    return Probe(result["baseline"], result["seconds"], tuple(result["loaded"]), tuple(result["compiled"]))


def fill_bytecode(cache: Path, modules: Sequence[str], *, compile_project: bool = False) -> None:
    """Compile what importing boto3 and each module loads into `cache` (untimed); with
    `compile_project`, then drop the project's own files from it, so they compile at every import."""
    for module in modules:
        completed = subprocess.run(
            [sys.executable, "-c", f"import boto3\nimport {module}"],
            capture_output=True,
            text=True,
            cwd=PROJECT_ROOT,
            env=bytecode_env(cache, write=True),
            check=False,
        )
        if completed.returncode != 0:
            raise RuntimeError(f"importing {module} failed: {completed.stderr.strip()[-500:]}")
    if compile_project:  # the project's files, not its virtual environment's (which may live inside it)
        project = cache / PROJECT_ROOT.relative_to(PROJECT_ROOT.anchor)
        environment = Path(sys.prefix).resolve()
        for entry in project.iterdir() if project.is_dir() else ():
            if environment.is_relative_to(PROJECT_ROOT / entry.name):
                continue
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def measure_imports(
    repeat: int = REPEAT, modules: Sequence[str] = HANDLERS, *, compile_project: bool = False
) -> dict[str, list[Probe]]:
    """`repeat` fresh interpreters per module, the modules interleaved (load spikes hit all alike),
    all reading one bytecode cache filled first (see the module docstring)."""
    probes: dict[str, list[Probe]] = {name: [] for name in modules}
    with tempfile.TemporaryDirectory(prefix="pipeops-bytecode-") as directory:
        cache = Path(directory)
        fill_bytecode(cache, modules, compile_project=compile_project)
        for _ in range(repeat):
            for name in probes:
                probes[name].append(probe(name, bytecode=cache))
    return probes


def over_baseline_ms(probes: Mapping[str, Sequence[Probe]]) -> dict[str, float]:
    """Each module's median import time over `import boto3`, in ms. Pure."""
    return {name: 1000 * statistics.median(p.seconds for p in runs) for name, runs in probes.items()}


def baseline_ms(probes: Mapping[str, Sequence[Probe]]) -> float:
    """The median fresh `import boto3`, over every interpreter, in ms. Pure."""
    return 1000 * statistics.median(p.baseline for runs in probes.values() for p in runs)


def unused_loaded(probes: Mapping[str, Sequence[Probe]]) -> dict[str, list[str]]:
    """Per handler, the heavy modules it loaded though `MUST_NOT_LOAD` says it has no use for them. Pure."""
    found: dict[str, list[str]] = {}
    for name, runs in probes.items():
        loaded = {module for run in runs for module in run.loaded}
        extra = sorted(loaded & set(MUST_NOT_LOAD.get(name, ())))
        if extra:
            found[name] = extra
    return found


def _short(module: str) -> str:
    return module.rsplit(".", 1)[-1] if module.startswith("pipeline.handlers.") else module.split(".")[0]


def rows(probes: Mapping[str, Sequence[Probe]]) -> list[GoalRow]:
    """The goal row from measured probes. Pure."""
    over = over_baseline_ms(probes)
    worst = max(over, key=over.__getitem__)
    unused = unused_loaded(probes)
    base_ms = baseline_ms(probes)
    base_fastest = 1000 * min(p.baseline for runs in probes.values() for p in runs)
    repeat = min(len(runs) for runs in probes.values())
    fastest = {name: 1000 * min(p.seconds for p in runs) for name, runs in probes.items()}
    each = ", ".join(
        f"{_short(name)} +{ms:.0f} (fastest +{fastest[name]:.0f})" for name, ms in sorted(over.items(), key=lambda kv: -kv[1])
    )
    loaded_note = (
        "; loaded without use: " + "; ".join(f"{_short(n)}: {', '.join(m)}" for n, m in unused.items())
        if unused
        else "; no handler loads a watched module it does not use (PII detector, OpenTelemetry, powertools "
        "batch, S3 event parser, AWS-metric catalog)"
    )
    compiled = {path for runs in probes.values() for run in runs for path in run.compiled}
    bytecode_note = (
        f"the project's {len(compiled)} files compiled at every import (as in the Lambda artifact), the rest "
        "read from fresh bytecode"
        if compiled
        else "every module read from fresh bytecode"
    )
    return [
        GoalRow(
            measure="handler cold import over `import boto3`",
            now=f"+{over[worst]:.0f} ms (worst: {_short(worst)})",
            goal=f"≤ +{GOAL_MS:.0f} ms, and only what that handler uses",
            met=over[worst] <= GOAL_MS and not unused,
            detail=(
                f"median of {repeat} fresh interpreters per handler, each importing boto3 (median {base_ms:.0f} "
                f"ms, fastest {base_fastest:.0f}) and then the handler, both timed inside it; "
                f"{bytecode_note}; no OTEL_ exporter set; each handler over boto3, median (fastest run) "
                f"in ms: "
                f"{each}{loaded_note}."
            ),
        )
    ]


def measure(repeat: int = REPEAT, *, compile_project: bool | None = None) -> list[GoalRow]:
    """The goal row (bytecode shipped); with `compile_project` None, also the sources-only row as context."""
    if compile_project is not None:
        return rows(measure_imports(repeat, compile_project=compile_project))
    [goal] = rows(measure_imports(repeat))
    [sources_only] = rows(measure_imports(repeat, compile_project=True))
    context = GoalRow(
        measure="handler cold import over `import boto3`, artifact of sources only (built without python3.12; not a goal)",
        now=sources_only.now,
        goal="-",
        met=False,
        detail=sources_only.detail,
    )
    return [goal, context]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.imports", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=REPEAT, help="fresh interpreters per module (>= 7)")
    parser.add_argument(
        "--compile-project",
        action="store_true",
        help="compile the project's own files at every import, as the Lambda artifact (sources only) does",
    )
    args = parser.parse_args(argv)
    for row in measure(max(args.repeat, REPEAT), compile_project=args.compile_project or None):
        print(f"{row.measure}: {row.now} (goal {row.goal}; {'met' if row.met else 'NOT met'})")
        print(f"  {row.detail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
