"""Errors raised by the PII package.

Messages name entity types, offsets and counts only: never the text or a detected value,
because exception messages end up in logs, traces and Step Functions error causes.
"""

from __future__ import annotations


class PiiError(Exception):
    """Base class for every error this package raises."""


class InvalidEntitiesError(PiiError, ValueError):
    """Entities overlap or fall outside the text, so they cannot be applied safely."""


class MissingReplacementError(PiiError, LookupError):
    """A detected value has no synthetic replacement in the mapping."""

    def __init__(self, entity_type: str, start: int) -> None:
        super().__init__(f"no replacement for the {entity_type} entity at offset {start}")
        self.entity_type = entity_type
        self.start = start


class SyntheticGenerationError(PiiError):
    """No acceptable fake could be derived for a value (its message names only the type)."""


class InvalidSecretError(PiiError, ValueError):
    """The mapping secret is too short to make fakes unguessable."""


class UnsupportedDetectorError(PiiError, ValueError):
    """The requested detector kind is not one this package provides."""
