"""What the offline PII detector costs the detect Lambda: cold import and detection time per MB.

    git archive HEAD | tar -x -C /tmp/pii_before                        # the tree before the change
    .venv/bin/python -m bench.pii_import --before-root /tmp/pii_before    # vs this tree; writes the section
    .venv/bin/python -m bench.pii_import --root /tmp/other --json r.json # one tree, raw numbers only

Every measurement runs in a fresh interpreter whose `sys.path` starts at `--root`, so the tree
measured is the one named (e.g. a `git archive` copy of HEAD before a change), with this venv:
1. Cold import: `import pipeline.handlers.detect`, and `import pipeline.pii` alone, timed inside
   the child (interpreter start-up excluded), `--repeat` fresh processes each, median; the trees
   take turns. Also which of phonenumbers/stdnum the import loaded.
2. First detection in a fresh process (what a cold Lambda's first file pays: lazy imports and
   metadata loading included), on a small document: median of 3 processes.
3. Warm detection: `OfflineDetector().detect` on a realistic mixed document of `--mb` MB (prose,
   log lines, CSV and JSON records with e-mails, phones of several countries, SSNs, cards, IBANs
   and IPs, and the number-heavy look-alikes real files hold: dates, versions, order numbers),
   median of 3 runs in each of 3 processes after one warm-up, reported per MB.

Writes only the `<!-- bench:pii-import -->` section of docs/PERFORMANCE.md (see bench.sections).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.sections import write_section

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = PROJECT_ROOT / "docs" / "PERFORMANCE.md"
SECTION = "pii-import"
DETECT_ROUNDS = 3  # fresh processes per tree for the detection timings (first detect: their median)
DETECT_RUNS = 3  # warm runs in each of them

_IMPORT_CHILD = """
import sys, time
sys.path.insert(0, {root!r})
t = time.perf_counter()
import {module}
elapsed = time.perf_counter() - t
import json
print(json.dumps({{"seconds": elapsed, "phonenumbers": "phonenumbers" in sys.modules,
                  "stdnum": any(name.startswith("stdnum") for name in sys.modules)}}))
"""

_DETECT_CHILD = """
import sys, time, json, statistics
sys.path.insert(0, {root!r})
from pipeline.pii import OfflineDetector
document = open({document!r}, encoding="utf-8").read()
small = document[:4000]
t = time.perf_counter()
OfflineDetector().detect(small)
first = time.perf_counter() - t
detector = OfflineDetector()
found = detector.detect(document)
runs = []
for _ in range({repeat}):
    t = time.perf_counter()
    detector.detect(document)
    runs.append(time.perf_counter() - t)
print(json.dumps({{"first_small": first, "runs": runs, "entities": len(found)}}))
"""

_FIRST = ("Dana", "Lee", "Amir", "Zoë", "Kofi", "Mei", "Olga", "Juan", "Priya", "Sean")
_LAST = ("O'Neil", "Smith", "Nakamura", "Müller", "Dubois", "Okafor", "Silva", "Kowalski")
_PHONES = (
    "+1 415 555 2671",
    "(415) 555-2671",
    "020 7946 0958",
    "+44 20 7946 0958",
    "0412 345 678",
    "(09) 123 4567",
    "030 12345678",
    "01 23 45 67 89",
    "+49 30 12345678",
    "0044 20 7946 0958",
)
_CARDS = ("4111 1111 1111 1111", "5555555555554444", "3782 822463 10005", "6011111111111117")
_IBANS = ("GB82 WEST 1234 5698 7654 32", "DE89370400440532013000", "FR1420041010050500013M02606")
_SSNS = ("078-05-1120", "219-09-9999", "123-45-6789")
_IPS = ("192.168.1.1", "10.0.0.1", "2001:db8::1", "fe80::1ff:fe23:4567:890a")
_WORDS = (
    "the", "shipment", "was", "delayed", "because", "the", "carrier", "rescheduled", "pickup",
    "and", "the", "warehouse", "team", "confirmed", "the", "revised", "schedule", "with", "the",
    "customer", "after", "reviewing", "invoice", "totals",
)  # fmt: skip


def _phone(rng: random.Random) -> str:
    """A phone of a random format whose last three digits vary: documents rarely repeat numbers."""
    template = rng.choice(_PHONES)
    head, tail = template[:-4], template[-4:]
    return head + "".join(
        str(rng.randrange(10)) if char.isdigit() and index else char for index, char in enumerate(tail)
    )


def mixed_document(megabytes: float, seed: int = 7) -> str:
    """A deterministic document of about `megabytes` MB mixing prose, logs, CSV and JSON. Pure."""
    rng = random.Random(seed)
    target = int(megabytes * 1_000_000)
    parts: list[str] = []
    size = 0
    while size < target:
        kind = rng.randrange(4)
        name = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
        email = f"{name.split()[0].lower()}.{rng.randrange(1000)}@example.com"
        if kind == 0:
            prose = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(20, 60)))
            piece = f"{name} ({email}) called from {_phone(rng)}; {prose}. Order 2024-{rng.randrange(1, 13):02d}-15 #100200{rng.randrange(10**6)}.\n"
        elif kind == 1:
            piece = (
                f"2024-05-{rng.randrange(1, 29):02d}T10:{rng.randrange(60):02d}:00Z INFO req={rng.randrange(10**9)} "
                f"client={rng.choice(_IPS)} app version 4.2.1.{rng.randrange(10)} latency_ms={rng.randrange(900)}\n"
            )
        elif kind == 2:
            piece = (
                f"{rng.randrange(10**6)},{name},{email},{_phone(rng)},{rng.choice(_SSNS)},"
                f"{rng.choice(_CARDS)},{rng.randrange(10**5)}.{rng.randrange(100):02d}\n"
            )
        else:
            piece = (
                json.dumps(
                    {
                        "id": rng.randrange(10**9),
                        "name": name,
                        "email": email,
                        "iban": rng.choice(_IBANS),
                        "phone": _phone(rng),
                        "amount": rng.randrange(10**6) / 100,
                        "ip": rng.choice(_IPS),
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
        parts.append(piece)
        size += len(piece.encode("utf-8"))
    return "".join(parts)


def _child(code: str) -> dict[str, Any]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/tmp", env=env
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure(
    roots: Sequence[Path], repeat: int, megabytes: float, document_path: Path
) -> list[dict[str, Any]]:
    """Import and detection timings of each tree (the shell: runs child interpreters).

    The trees take turns, process by process, so that load from other work on the shared machine
    falls on each of them alike rather than on whichever ran second.
    """
    document_path.write_text(mixed_document(megabytes), encoding="utf-8")
    imports: dict[Path, list[dict[str, Any]]] = {root: [] for root in roots}
    package_imports: dict[Path, list[float]] = {root: [] for root in roots}
    detects: dict[Path, list[dict[str, Any]]] = {root: [] for root in roots}
    for round_ in range(repeat):
        for root in roots:
            imports[root].append(
                _child(_IMPORT_CHILD.format(root=str(root), module="pipeline.handlers.detect"))
            )
            package = _child(_IMPORT_CHILD.format(root=str(root), module="pipeline.pii"))
            package_imports[root].append(package["seconds"])
            if round_ < DETECT_ROUNDS:
                code = _DETECT_CHILD.format(root=str(root), document=str(document_path), repeat=DETECT_RUNS)
                detects[root].append(_child(code))
    machine = f"{platform.machine()}, {os.cpu_count()} cores (shared), Python {platform.python_version()}"
    return [
        {
            "root": str(root),
            "repeat": repeat,
            "megabytes": megabytes,
            "import_s": [run["seconds"] for run in imports[root]],
            "pii_import_s": package_imports[root],
            "import_loads_phonenumbers": imports[root][0]["phonenumbers"],
            "import_loads_stdnum": imports[root][0]["stdnum"],
            "first_small_detect_s": statistics.median(run["first_small"] for run in detects[root]),
            "detect_s": [seconds for run in detects[root] for seconds in run["runs"]],
            "entities": detects[root][0]["entities"],
            "machine": machine,
        }
        for root in roots
    ]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def render(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The section body (without markers). Pure."""

    def row(label: str, key: str) -> str:
        return f"| {label} | {key_fmt(before, key)} | {key_fmt(after, key)} |"

    def key_fmt(result: dict[str, Any], key: str) -> str:
        if key in ("import", "pii_import"):
            runs = result[f"{key}_s"]
            return f"{_ms(statistics.median(runs))} (min {_ms(min(runs))})"
        if key == "loads":
            loaded = [name for name in ("phonenumbers", "stdnum") if result[f"import_loads_{name}"]]
            return ", ".join(loaded) or "neither"
        if key == "first":
            return _ms(result["first_small_detect_s"])
        if key == "per_mb":
            return f"{_ms(statistics.median(result['detect_s']) / result['megabytes'])} per MB"
        return str(result["entities"])

    return "\n".join(
        [
            "## PII detector: detect Lambda cold import and detection time",
            "",
            f"`python -m bench.pii_import --before-root {before['root']} --root {after['root']}`",
            f"on {after['machine']}.",
            "Other sessions were running tests on the same 2 shared cores, so every number is a median",
            f"and the two trees took turns: {after['repeat']} fresh processes per tree for each import,",
            f"{DETECT_ROUNDS} processes x {DETECT_RUNS} warm runs for detection. Before: `git archive` of HEAD;",
            f"after: {after['root']}, the same HEAD with only `pipeline/pii/` replaced by the issue-10",
            "detector, so other sessions' edits elsewhere do not blur the comparison.",
            "",
            "| measure | before | after |",
            "|---|---|---|",
            row("cold `import pipeline.handlers.detect` (median)", "import"),
            row("cold `import pipeline.pii` alone (median)", "pii_import"),
            row("PII libraries loaded by that import", "loads"),
            row("first `detect` in a fresh process (4 KB; lazy imports included)", "first"),
            row(f"warm `OfflineDetector.detect`, {after['megabytes']:g} MB mixed document", "per_mb"),
            row("entities found in that document", "entities"),
            "",
            "phonenumbers and stdnum are imported by the detector modules on first use, not by",
            "`import pipeline.pii` (row 3 shows neither is loaded by the handler import), so the cold",
            "import is unchanged within noise. The first detection pays instead (row 4, "
            f"+{_ms(after['first_small_detect_s'] - before['first_small_detect_s'])} once per container):",
            "importing phonenumbers and its per-region metadata when a phone-shaped token appears, and",
            "reading python-stdnum's IBAN registry when an IBAN-shaped token appears.",
            "Warm detection costs more per MB because every phone-shaped candidate is",
            "parsed and validated by libphonenumber (cached per distinct value within a process); the",
            "after detector finds more entities because it finds national phone formats, labelled",
            "SSNs, more card brands and IBAN countries.",
        ]
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.pii_import", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=PROJECT_ROOT, help="tree to measure (default: this one)")
    parser.add_argument("--repeat", type=int, default=7, help="fresh processes / runs per measure (median)")
    parser.add_argument("--mb", type=float, default=1.0, help="size of the mixed document in MB")
    parser.add_argument("--json", type=Path, help="write the raw result here")
    parser.add_argument(
        "--before-root", type=Path, help="the tree before the change: measure both, write the section"
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="report path (default docs/PERFORMANCE.md)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    roots = [args.before_root.resolve(), args.root.resolve()] if args.before_root else [args.root.resolve()]
    results = measure(roots, args.repeat, args.mb, Path(f"/tmp/pii_bench_doc_{os.getpid()}.txt"))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))
    if args.before_root:
        before, after = results
        write_section(args.out, SECTION, render(before, after))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
