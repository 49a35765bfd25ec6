"""The Comprehend detector chunks long text under the API limit and maps offsets back exactly."""

from __future__ import annotations

from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.pii import ComprehendDetector, EntityType, PiiEntity, chunk_text
from pipeline.pii.comprehend import MAX_TEXT_BYTES


@pytest.fixture(scope="module")
def client() -> Any:
    session = botocore.session.get_session()
    return session.create_client(
        "comprehend", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )


@pytest.fixture
def stubber(client: Any) -> Any:
    with Stubber(client) as stub:
        yield stub
        stub.assert_no_pending_responses()


def entity(entity_type: str, begin: int, end: int, score: float = 0.99) -> dict[str, Any]:
    return {"Type": entity_type, "BeginOffset": begin, "EndOffset": end, "Score": score}


def expect(stubber: Stubber, text: str, *entities: dict[str, Any]) -> None:
    stubber.add_response(
        "detect_pii_entities", {"Entities": list(entities)}, {"Text": text, "LanguageCode": "en"}
    )


# --- chunking ----------------------------------------------------------------------------------


def test_text_under_the_limit_is_one_chunk() -> None:
    [chunk] = chunk_text("short text\n")
    assert (chunk.offset, chunk.text) == (0, "short text\n")


def test_chunks_end_after_a_newline_when_there_is_one() -> None:
    chunks = chunk_text("aaaa bbbb\ncccc dddd\n", max_bytes=12)
    assert [chunk.text for chunk in chunks] == ["aaaa bbbb\n", "cccc dddd\n"]


def test_chunks_fall_back_to_whitespace_then_to_a_hard_cut() -> None:
    assert [c.text for c in chunk_text("aaa bbb ccc", max_bytes=8)] == ["aaa bbb ", "ccc"]
    assert [c.text for c in chunk_text("abcdefghij", max_bytes=4)] == ["abcd", "efgh", "ij"]


def test_a_multibyte_character_is_never_split() -> None:
    chunks = chunk_text("€€€€", max_bytes=7)  # 3 bytes each
    assert [c.text for c in chunks] == ["€€", "€€"]


def test_a_limit_below_one_character_is_refused() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        chunk_text("text", max_bytes=3)


@settings(max_examples=60, deadline=None, database=None)
@given(st.text(st.characters(exclude_categories=["Cs"]), max_size=60), st.integers(4, 24))
def test_chunks_cover_the_text_exactly_and_fit_the_limit(text: str, max_bytes: int) -> None:
    chunks = chunk_text(text, max_bytes)
    assert "".join(chunk.text for chunk in chunks) == text
    assert all(text[chunk.offset : chunk.offset + len(chunk.text)] == chunk.text for chunk in chunks)
    assert all(0 < len(chunk.text.encode("utf-8")) <= max_bytes for chunk in chunks)


# --- detection through the Stubber -------------------------------------------------------------


def test_a_long_document_is_sent_in_chunks_and_offsets_are_shifted_back(client: Any, stubber: Stubber) -> None:
    line = "Grüße aus Köln — nothing personal in this line at all, señor.\n"  # multi-byte characters
    filler = line * (MAX_TEXT_BYTES // len(line.encode("utf-8")))
    text = filler + filler[: len(filler) // 2] + "write to jane@example.com\n" + filler  # ~250 KB
    chunks = chunk_text(text)
    assert len(chunks) == 3
    assert all(len(chunk.text.encode("utf-8")) <= MAX_TEXT_BYTES for chunk in chunks)
    assert all(chunk.text.endswith("\n") for chunk in chunks)
    email_at = text.index("jane@example.com")
    [holder] = [c for c in chunks if c.offset <= email_at < c.offset + len(c.text)]
    assert holder.offset > 0  # the interesting case: the value is not in the first chunk

    for chunk in chunks:
        if chunk is holder:
            local = email_at - chunk.offset  # Comprehend answers in chunk-relative characters
            expect(stubber, chunk.text, entity("NAME", 0, 5), entity("EMAIL", local, local + 16))
        else:
            expect(stubber, chunk.text, entity("PHONE", 0, 5, score=0.2))
    detected = ComprehendDetector(client).detect(text)

    assert detected == [PiiEntity(EntityType.EMAIL, email_at, email_at + 16, 0.99)]
    assert text[detected[0].start : detected[0].end] == "jane@example.com"


def test_only_supported_types_above_the_minimum_score_are_kept(client: Any, stubber: Stubber) -> None:
    text = "Jane, SSN 123-45-6789, born 1990"
    expect(
        stubber,
        text,
        entity("NAME", 0, 4),
        entity("SSN", 10, 21, score=0.5),
        entity("DATE_TIME", 28, 32),
        entity("IP_ADDRESS", 28, 32, score=0.49),
    )
    assert ComprehendDetector(client).detect(text) == [PiiEntity(EntityType.SSN, 10, 21, 0.5)]


def test_overlapping_results_are_resolved(client: Any, stubber: Stubber) -> None:
    text = "call +1 415 555 2671"
    expect(stubber, text, entity("PHONE", 8, 20), entity("PHONE", 5, 20))
    assert ComprehendDetector(client).detect(text) == [PiiEntity(EntityType.PHONE, 5, 20, 0.99)]


def test_blank_text_is_not_sent(client: Any, stubber: Stubber) -> None:
    assert ComprehendDetector(client).detect("") == []
    assert ComprehendDetector(client).detect(" \n\t") == []


def test_service_errors_propagate_for_the_task_retry_policy(client: Any, stubber: Stubber) -> None:
    stubber.add_client_error("detect_pii_entities", service_error_code="TextSizeLimitExceededException")
    with pytest.raises(ClientError, match="TextSizeLimitExceededException"):
        ComprehendDetector(client).detect("some text")


def test_the_minimum_score_must_be_a_probability(client: Any) -> None:
    with pytest.raises(ValueError, match="min_score"):
        ComprehendDetector(client, min_score=1.5)


def test_from_env_builds_a_client_with_adaptive_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    detector = ComprehendDetector.from_env(language_code="es")
    assert detector.client.meta.config.retries["mode"] == "adaptive"
    assert detector.client.meta.region_name == "eu-west-1"
    assert detector.language_code == "es"
