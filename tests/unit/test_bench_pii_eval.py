"""bench.pii_eval: how it scores, and that docs/PII.md is current and the targets are met."""

from __future__ import annotations

from pathlib import Path

from bench.pii_eval import (
    BLIND_DIR,
    BLIND_SECTION,
    DEFAULT_OUT,
    MIN_RECALL,
    Case,
    evaluate,
    failures,
    load_cases,
    main,
    render,
    source,
)
from bench.sections import replace_section
from pipeline.pii import EntityType, OfflineDetector, PiiEntity

PHONE, SSN = str(EntityType.PHONE), str(EntityType.SSN)


class _Canned:
    """A detector that reports fixed spans per text: scoring is tested apart from detection."""

    def __init__(self, spans: dict[str, list[PiiEntity]]) -> None:
        self._spans = spans

    def detect(self, text: str) -> list[PiiEntity]:
        return self._spans.get(text, [])


def test_scoring_counts_hits_misses_wrong_types_and_flagged_negatives() -> None:
    cases = [
        Case(PHONE, "hit", "call 020 7946 0958", ("020 7946 0958",)),
        Case(PHONE, "miss", "call 0412 345 678", ("0412 345 678",)),
        Case(PHONE, "wrong-type", "ring 078 05 1123 now", ("078 05 1123",)),
        Case(PHONE, "negative:flagged", "+10 20 30 40", ()),
        Case(PHONE, "negative:clean", "id 4155552671", ()),
    ]
    detector = _Canned(
        {
            "call 020 7946 0958": [PiiEntity(PHONE, 5, 18)],
            "ring 078 05 1123 now": [PiiEntity(SSN, 5, 16)],
            "+10 20 30 40": [PiiEntity(PHONE, 0, 12)],
        }
    )
    scores = evaluate(cases, detector)
    phone, ssn = scores[PHONE], scores[SSN]
    assert (phone.expected, phone.true_positives, phone.false_positives) == (3, 1, 1)
    assert (phone.negatives, phone.negatives_flagged) == (2, 1)
    assert phone.recall == 1 / 3 and phone.precision == 1 / 2
    assert (ssn.true_positives, ssn.false_positives) == (0, 1)
    assert failures(scores) == [
        f"{PHONE}: recall 33.3% < {MIN_RECALL:.0%}",
        f"{PHONE}: 1 negative case(s) flagged",
    ]
    assert "| PHONE | 3 | 1 | 33.3% | 2 | 50.0% | 2 | 1 |" in render(scores, len(cases))


def test_the_test_set_covers_every_type() -> None:
    assert {case.type for case in load_cases()} == set(map(str, EntityType))


def test_docs_pii_md_is_current_and_every_target_is_met() -> None:
    """Fails when the detector or the test set changed without `python -m bench.pii_eval`."""
    assert Path(__file__).resolve().parents[2] / "docs" / "PII.md" == DEFAULT_OUT
    assert main(["--check"]) == 0


def test_values_of_other_types_listed_under_also_count_for_their_type() -> None:
    case = Case(PHONE, "mixed", "call 020 7946 0958, SSN 123-45-6789", ("020 7946 0958",), ((SSN, "123-45-6789"),))
    detector = _Canned({case.text: [PiiEntity(PHONE, 5, 18), PiiEntity(SSN, 24, 35)]})
    scores = evaluate([case], detector)
    assert (scores[PHONE].true_positives, scores[SSN].expected, scores[SSN].true_positives) == (1, 1, 1)
    assert scores[PHONE].negatives == scores[SSN].false_positives == 0


def test_docs_pii_md_reports_todays_blind_set_scores() -> None:
    """Fails when the detector changed without `python -m bench.pii_eval --cases tests/unit/pii_blind --section pii-blind-set`."""
    current = DEFAULT_OUT.read_text(encoding="utf-8")
    cases = load_cases(BLIND_DIR)
    body = render(evaluate(cases, OfflineDetector()), len(cases), source(BLIND_DIR, BLIND_SECTION))
    assert replace_section(current, BLIND_SECTION, body) == current
