"""PII detection with Amazon Comprehend's DetectPiiEntities.

The API takes at most 100 KB of UTF-8 per call, so long documents are cut into chunks at line
(or else whitespace) boundaries and the chunk-relative offsets are shifted back. Throttling and
transient errors are retried by botocore itself (adaptive mode in :meth:`from_env`); anything
that still fails propagates, so the Step Functions task retry policy decides what happens next.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pipeline.pii.types import EntityType, PiiEntity, resolve_overlaps

# "100 KB" in the API reference; the decimal reading leaves headroom under either interpretation.
MAX_TEXT_BYTES = 100_000
DEFAULT_MIN_SCORE = 0.5
DEFAULT_MAX_ATTEMPTS = 10
_SUPPORTED_TYPES = frozenset(EntityType)


class ComprehendClient(Protocol):
    """The one call this module makes (a boto3 `comprehend` client satisfies it)."""

    def detect_pii_entities(self, *, Text: str, LanguageCode: str) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A slice of the document; `offset` is its character offset in the whole text."""

    offset: int
    text: str


def _fitting_end(text: str, start: int, max_bytes: int) -> int:
    """The largest end such that text[start:end] encodes to at most max_bytes of UTF-8."""
    window = text[start : start + max_bytes]  # a character is at least one byte
    encoded = window.encode("utf-8")
    if len(encoded) <= max_bytes:
        return start + len(window)
    # Dropping the partial character at the cut leaves exactly the characters that fit.
    return start + len(encoded[:max_bytes].decode("utf-8", errors="ignore"))


def _boundary(text: str, start: int, end: int) -> int:
    """Where to cut before `end`: after the last newline, else after the last whitespace.

    Only the second half of the chunk is searched so that chunks stay large; a text with no
    whitespace there is cut hard, which may split a token but never loses characters.
    """
    floor = start + (end - start) // 2
    newline = text.rfind("\n", floor, end)
    if newline != -1:
        return newline + 1
    for index in range(end - 1, floor - 1, -1):
        if text[index].isspace():
            return index + 1
    return end


def chunk_text(text: str, max_bytes: int = MAX_TEXT_BYTES) -> list[TextChunk]:
    """Consecutive chunks covering `text` exactly, each at most `max_bytes` of UTF-8."""
    if max_bytes < 4:
        raise ValueError("max_bytes must fit at least one UTF-8 character (4 bytes)")
    chunks: list[TextChunk] = []
    start = 0
    while start < len(text):
        end = _fitting_end(text, start, max_bytes)
        if end < len(text):
            end = _boundary(text, start, end)
        chunks.append(TextChunk(start, text[start:end]))
        start = end
    return chunks


def _entities(response: Mapping[str, Any], chunk: TextChunk, min_score: float) -> Iterable[PiiEntity]:
    for item in response.get("Entities", ()):
        entity_type, score = item.get("Type"), float(item.get("Score", 0.0))
        begin, end = int(item.get("BeginOffset", -1)), int(item.get("EndOffset", -1))
        if entity_type not in _SUPPORTED_TYPES or score < min_score:
            continue
        if not 0 <= begin < end <= len(chunk.text):
            continue  # defensive: an offset outside the chunk cannot be applied safely
        yield PiiEntity(EntityType(entity_type), chunk.offset + begin, chunk.offset + end, score)


@dataclass(frozen=True, slots=True)
class ComprehendDetector:
    """Comprehend-backed detection, restricted to :class:`EntityType` and a minimum score.

    Comprehend returns offsets in Unicode code points, which are Python str indices.
    """

    client: ComprehendClient
    language_code: str = "en"
    min_score: float = DEFAULT_MIN_SCORE
    max_text_bytes: int = MAX_TEXT_BYTES

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_score <= 1.0:
            raise ValueError(f"min_score must be within [0, 1], got {self.min_score}")
        if self.max_text_bytes < 4:
            raise ValueError("max_text_bytes must be at least 4")

    @classmethod
    def from_env(
        cls,
        language_code: str = "en",
        min_score: float = DEFAULT_MIN_SCORE,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> ComprehendDetector:
        """A detector on a default client: region and credentials from the environment."""
        import boto3
        from botocore.config import Config

        config = Config(retries={"mode": "adaptive", "max_attempts": max_attempts})
        return cls(boto3.client("comprehend", config=config), language_code, min_score)

    def detect(self, text: str) -> list[PiiEntity]:
        found: list[PiiEntity] = []
        for chunk in chunk_text(text, self.max_text_bytes):
            if not chunk.text.strip():
                continue  # nothing to find, and the API rejects empty text
            response = self.client.detect_pii_entities(Text=chunk.text, LanguageCode=self.language_code)
            found.extend(_entities(response, chunk, self.min_score))
        return resolve_overlaps(found)
