"""The units of the metric catalogs (`catalog`, the pipeline's own; `aws_catalog`, AWS's), in
CloudWatch's spelling: their own module so that neither catalog imports the other."""

from __future__ import annotations

from enum import StrEnum


class Unit(StrEnum):
    COUNT = "Count"
    SECONDS = "Seconds"
    MILLISECONDS = "Milliseconds"
    BYTES = "Bytes"
    PERCENT = "Percent"
