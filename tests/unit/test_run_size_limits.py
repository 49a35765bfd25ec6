"""MaxFilesPerRun keeps the largest run inside AWS's limits: the arithmetic, checked.

A run's file keys travel three ways: in its tracking item (DynamoDB, 400 KB = 409,600 bytes an
item), in its execution's input and every state (Step Functions, 256 KiB = 262,144 bytes), and as
events in its execution history (25,000 at most). The worst case of each is built here for the
default (and largest allowed) MaxFilesPerRun with keys of S3's maximum length, 1,024 bytes, and
measured with the sandbox's own size functions (sandbox.seams.limits, the ones that enforce the limits).

    tracking item  ~ N x (1,024 key in `files` + 1,024 key + 128 error + 300 message in
                     `failed_files`) + 1 KB cause + small fields    = 253,211 bytes for N = 100
    state          ~ N x (1,024 + 3) + ~2 KB of job fields           = 104,794 bytes for N = 100,
                     + 2 Maps x N x SUMMARY_MAX_BYTES (120) of per-file summaries: 129,000 at most
    history        ~ 2 Maps x N x (7 events + every retry + a recorded failure with its
                     retries) + the job-level steps at their worst  = ~8,650 events for N = 100

The item stays under 62% of its limit with every file failed, the state and the history under
half of theirs, so JSON escaping (a `"` in a key doubles) cannot push a run over. 150 files would
still fit the state and the history but put the worst item at ~380 KB of 409,600 bytes; hence
100, which the template also takes as MaxValue.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import yaml

from pipeline.artifacts import MAX_CAUSE_BYTES, MAX_ERROR_NAME_BYTES
from pipeline.config import DEFAULT_MAX_FILES_PER_RUN, Settings, load_settings
from pipeline.jobs import RunRef, execution_name, format_timestamp
from pipeline.routing import execution_input
from pipeline.stores._dynamodb import to_attribute
from pipeline.stores.tracking import RunRecord, queued_run_item
from pipeline.tasks import MAX_MESSAGE_BYTES, SUMMARY_MAX_BYTES
from sandbox.seams.limits import MAX_ITEM_BYTES, MAX_PAYLOAD_BYTES, item_size, payload_size

ROOT = Path(__file__).resolve().parents[2]
N = DEFAULT_MAX_FILES_PER_RUN
HISTORY_LIMIT = 25_000


def longest_keys(count: int) -> list[str]:
    keys = []
    for index in range(count):
        head = f'inbox/"é-{index:05d}-'
        keys.append(head + "k" * (1024 - len(head.encode())))
        assert len(keys[-1].encode()) == 1024
    return keys


def _template_parameter() -> dict:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "template.yaml").read_text(), Loader=Loader)["Parameters"]["MaxFilesPerRun"]


def test_the_default_is_the_template_default_and_its_largest_allowed_value() -> None:
    parameter = _template_parameter()
    assert int(parameter["Default"]) == int(parameter["MaxValue"]) == N == Settings().max_files_per_run
    assert load_settings({"MAX_FILES_PER_RUN": "7"}).max_files_per_run == 7


def test_the_largest_tracking_item_stays_well_under_400_kb() -> None:
    keys = longest_keys(N)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    run = RunRef("j" * 1024, format_timestamp(now))  # a root-level file is its own job: a key
    item = queued_run_item(run, keys, "b" * 63, now)
    message = "m" * MAX_MESSAGE_BYTES
    error = "E" * MAX_ERROR_NAME_BYTES
    # every file failed, with the longest error and message the record keeps
    failed_files = {"detect": [{"key": k, "error": error, "message": message} for k in keys], "redact": [], "unsupported": [], "empty": []}
    item |= {
        "status": {"S": "FAILED"},
        "execution_arn": {"S": "arn:aws:states:us-east-1:123456789012:execution:" + "s" * 80 + ":" + "x" * 80},
        "admission": {"S": "a" * 32},
        "error": {"S": error},
        "cause": {"S": "c" * MAX_CAUSE_BYTES},
        "last_error": {"S": error},
        "failed_files": to_attribute(failed_files),
        "redaction_results": to_attribute(
            {
                "files_total": N, "files_redacted": 0, "files_failed": N, "files_empty": 0, "files_unsupported": 0,
                "replacements": 10**9, "entities_by_type": {t: 10**9 for t in ("EMAIL", "PHONE", "SSN", "CREDIT_DEBIT_NUMBER", "NAME", "ADDRESS")},
            }
        ),
        "results_s3_prefix": {"S": f"_pipeops/runs/{'x' * 80}/results/"},
        "mapping_s3_key": {"S": f"_pipeops/runs/{'x' * 80}/mapping.json"},
    }
    size = item_size(item)
    assert size < MAX_ITEM_BYTES / 1.6, size
    # the router's interim shape (every file unsupported, listed twice) is smaller still
    interim = queued_run_item(run, keys, "b" * 63, now) | {"failed_files": to_attribute({"unsupported": keys})}
    assert item_size(interim) < size
    assert RunRecord.from_item(item).files == tuple(sorted(keys))


def test_the_largest_execution_input_stays_under_half_of_256_kib() -> None:
    keys = longest_keys(N)
    record = RunRecord(job_id="j" * 1024, started_at=format_timestamp(datetime(2026, 1, 1, tzinfo=UTC)), status="IN_PROGRESS", updated_at="", files=tuple(keys), bucket="b" * 63)  # type: ignore[arg-type]
    settings = Settings(output_bucket="o" * 63)
    trace = {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "tracestate": "t" * 512}
    payload = execution_input(record, keys[:-10], keys[-10:], settings, trace)
    assert len(payload["execution_name"]) <= 80 and payload["execution_name"] == execution_name(record.job_id, record.started_at)
    size = payload_size(payload)
    # later states add the per-file summaries of both Maps (synthetic mode: `detections` and
    # `redactions`, each at most SUMMARY_MAX_BYTES and a comma), the account's check (~150 bytes)
    # and a mapping key (~120 bytes)
    summaries = 2 * N * (SUMMARY_MAX_BYTES + 1)
    assert size + summaries + 1_000 < MAX_PAYLOAD_BYTES / 2, (size, summaries)


def test_the_largest_history_stays_far_below_25000_events() -> None:
    per_task = 5  # TaskStateEntered, LambdaFunctionScheduled, Started, Succeeded|Failed, TaskStateExited
    per_retry = 3  # LambdaFunctionScheduled, Started, Failed again
    per_item = 2 + per_task + 5 * per_retry + (per_task + 5 * per_retry)  # iteration events, task, retries, a recorder with retries
    per_map = 4 + N * per_item  # MapStateEntered/Started/Succeeded/Exited
    job_steps = 12 * (per_task + 5 * per_retry)  # every job-level task at its worst
    worst = 2 * per_map + job_steps
    assert worst < HISTORY_LIMIT / 2, worst
