"""Realtime mode against the sandbox: files whose keys hold '+', '%', spaces and unicode are all
processed, through the ingest role's real permissions, and a console folder marker is no file."""

from __future__ import annotations

from typing import Any

from pipeline.status import JobStatus
from tests.e2e.test_pipeline_e2e import (
    ALL_PII,
    all_runs,
    assert_dead_letter_queues_empty,
    files_of,
    pii_text,
    read_output,
    upload,
    wait_idle,
)

FILES = {
    "c++/a+b.txt": pii_text(1),
    "c++/100% sure.txt": pii_text(2),
    "with space/file name.txt": pii_text(3),
    "unicodé/ファイル 1+1.txt": pii_text(4),
    "root+plus%25.txt": pii_text(5),
}


def test_awkward_keys_are_processed_and_a_folder_marker_is_skipped(sandbox: Any) -> None:
    upload(sandbox, {"newfolder/": b"", **FILES})
    wait_idle(sandbox)
    runs = all_runs(sandbox)
    assert set(files_of(runs)) == set(FILES), "every file in a run, the folder marker in none"
    assert {run.status for run in runs} == {JobStatus.COMPLETE}
    assert all(run.failed_files[kind] == [] for run in runs for kind in ("detect", "redact", "empty"))
    for key in FILES:
        redacted = read_output(sandbox, key)
        assert redacted is not None, f"no redacted copy of {key}"
        assert not [value for value in ALL_PII if value in redacted], key
    assert_dead_letter_queues_empty(sandbox)
