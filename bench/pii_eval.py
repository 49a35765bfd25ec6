"""Recall and precision of the offline PII detector on a case set; writes its section of docs/PII.md.

    .venv/bin/python -m bench.pii_eval            # the project's own set: rewrite the section
    .venv/bin/python -m bench.pii_eval --check    # exit 1 when the section is stale or a target is missed
    .venv/bin/python -m bench.pii_eval --cases DIR --out /tmp/other.md   # another set in the same format

The test set is `tests/unit/pii_cases/*.json`, one file per entity type: positive cases (running
text, CSV and JSON documents, each listing every value of that type it holds, and no PII of any
other type unless listed under `also`, as {type: [values]}) and negatives (near misses: nothing in
them may be reported). The blind set (tests/unit/pii_blind/, bench.pii_blind_set) has the same
format, with `also` for its documents that hold several types. Scoring, per type:
- a true positive is a detection of the type whose text equals an expected value (each expected
  occurrence matched at most once, left to right);
- a false positive is any other detection: a wrong span, a wrong type, anything in a negative;
- recall = true positives / expected values; precision = true positives / detections of the type.
Deterministic (no timing), so the section is reproducible and `--check` can guard it in tests.
Only the `<!-- bench:pii-own-set -->` section is generated (bench.sections); the rest of
docs/PII.md (what the detector does, the independent set's scores) is written by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.sections import replace_section
from pipeline.pii import OfflineDetector, PiiDetector

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CASES_DIR = PROJECT_ROOT / "tests" / "unit" / "pii_cases"
BLIND_DIR = PROJECT_ROOT / "tests" / "unit" / "pii_blind"
BLIND_SECTION = "pii-blind-set"
DEFAULT_OUT = PROJECT_ROOT / "docs" / "PII.md"
MIN_RECALL = 0.98
SECTION = "pii-own-set"
OWN_SET_SOURCE = "`python -m bench.pii_eval` on `tests/unit/pii_cases/`"


@dataclass(frozen=True, slots=True)
class Case:
    """One document of the test set: `values` of `type` it holds (none for a negative) and `also` of other types."""

    type: str
    id: str
    text: str
    values: tuple[str, ...]
    also: tuple[tuple[str, str], ...] = ()

    @property
    def expected(self) -> list[tuple[str, str]]:
        """(type, text) of every value to find, the case's own type first."""
        return [(self.type, value) for value in self.values] + list(self.also)


@dataclass(slots=True)
class Score:
    expected: int = 0
    true_positives: int = 0
    false_positives: int = 0
    negatives: int = 0
    negatives_flagged: int = 0
    missed: list[str] = field(default_factory=list)
    spurious: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.true_positives / self.expected if self.expected else 1.0

    @property
    def precision(self) -> float:
        detected = self.true_positives + self.false_positives
        return self.true_positives / detected if detected else 1.0


def load_cases(directory: Path = CASES_DIR) -> list[Case]:
    """Every case of every `*.json` file in `directory`, in file then file order."""
    cases: list[Case] = []
    for path in sorted(directory.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        entity_type = document["type"]
        for item in document["positives"]:
            also = tuple((other, value) for other, found in item.get("also", {}).items() for value in found)
            cases.append(Case(entity_type, item["id"], item["text"], tuple(item["values"]), also))
        for item in document["negatives"]:
            cases.append(Case(entity_type, f"negative:{item['id']}", item["text"], ()))
    return cases


def evaluate(cases: Iterable[Case], detector: PiiDetector) -> dict[str, Score]:
    """Scores per entity type (pure given a pure detector)."""
    scores: dict[str, Score] = {}
    for case in cases:
        own = scores.setdefault(case.type, Score())
        remaining = case.expected
        for entity_type, _ in remaining:
            scores.setdefault(entity_type, Score()).expected += 1
        if not remaining:
            own.negatives += 1
        flagged = False
        for entity in detector.detect(case.text):
            found = (str(entity.type), case.text[entity.start : entity.end])
            score = scores.setdefault(found[0], Score())
            if found in remaining:
                remaining.remove(found)
                score.true_positives += 1
                continue
            flagged = True
            score.false_positives += 1
            score.spurious.append(case.id)
        for entity_type, value in remaining:
            scores[entity_type].missed.append(f"{case.id}: {value}")
        own.negatives_flagged += flagged and not case.expected
    return scores


def failures(scores: dict[str, Score]) -> list[str]:
    """What misses the acceptance targets: recall below MIN_RECALL, any flagged negative."""
    problems = []
    for entity_type, score in sorted(scores.items()):
        if score.recall < MIN_RECALL:
            problems.append(f"{entity_type}: recall {score.recall:.1%} < {MIN_RECALL:.0%}")
        if score.negatives_flagged:
            problems.append(f"{entity_type}: {score.negatives_flagged} negative case(s) flagged")
    return problems


def render(scores: dict[str, Score], case_count: int, source: str = OWN_SET_SOURCE) -> str:
    """The generated section of docs/PII.md (without its markers). Pure."""
    lines = [
        f"{source} ({case_count} documents). Generated: do not",
        "edit by hand; `tests/unit/test_bench_pii_eval.py` fails when it is stale.",
        f"Acceptance: recall ≥ {MIN_RECALL:.0%} per type and no negative case flagged.",
        "",
        "| type | expected values | found | recall | detections | precision | negatives | negatives flagged |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for entity_type, score in sorted(scores.items()):
        lines.append(
            f"| {entity_type} | {score.expected} | {score.true_positives} | {score.recall:.1%} | "
            f"{score.true_positives + score.false_positives} | {score.precision:.1%} | {score.negatives} | "
            f"{score.negatives_flagged} |"
        )
    misses = [(entity_type, item) for entity_type, score in sorted(scores.items()) for item in score.missed]
    spurious = [
        (entity_type, item) for entity_type, score in sorted(scores.items()) for item in score.spurious
    ]
    lines += ["", "Misses:", ""]
    lines += [f"- {entity_type}: `{item}`" for entity_type, item in misses] or ["None."]
    lines += ["", "False positives (case ids):", ""]
    lines += [f"- {entity_type} in `{item}`" for entity_type, item in spurious] or ["None."]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.pii_eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, default=CASES_DIR, help="directory of the case files")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="report path (default docs/PII.md)")
    parser.add_argument("--check", action="store_true", help="fail if the section is stale or a target missed")
    parser.add_argument("--section", default=SECTION, help=f"the report's section to write (default {SECTION})")
    return parser.parse_args(argv)


def source(cases: Path, section: str) -> str:
    """The section header's first words: the command that regenerates it, on which cases."""
    cases = cases.resolve()
    if cases == CASES_DIR and section == SECTION:
        return OWN_SET_SOURCE
    shown = cases.relative_to(PROJECT_ROOT).as_posix() if cases.is_relative_to(PROJECT_ROOT) else cases.name
    return f"`python -m bench.pii_eval --cases {shown} --section {section}` on `{shown}/`"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cases = load_cases(args.cases)
    scores = evaluate(cases, OfflineDetector())
    current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
    report = replace_section(current, args.section, render(scores, len(cases), source(args.cases, args.section)))
    problems = failures(scores)
    if args.check:
        if current != report:
            problems.append(f"{args.out} is stale: run python -m bench.pii_eval")
    else:
        args.out.write_text(report, encoding="utf-8")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
