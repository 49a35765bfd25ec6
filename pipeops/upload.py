"""Files into the pipeline's input bucket, keyed relative to each folder given."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Uploaded:
    bucket: str
    keys: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def upload_paths(s3: Any, bucket: str, paths: Sequence[Path], prefix: str = "") -> Uploaded:
    """Every file of `paths` (folders recursively, in name order) under `prefix`."""
    uploaded = []
    for path in paths:
        files = [(p, p.relative_to(path).as_posix()) for p in sorted(path.rglob("*")) if p.is_file()] if path.is_dir() else [(path, path.name)]
        for local, relative in files:
            key = f"{prefix}{relative}"
            s3.upload_file(str(local), bucket, key)
            uploaded.append(key)
    return Uploaded(bucket, uploaded)
