"""Object claims: the latest version of each S3 object ingest has seen, and the run it put it in.

Claims live in the coordination table (its idempotency half), key `object#<bucket>/<key>`. A claim
is written in the same transaction that puts the file into a run (and, for a new run, points the
job's head at it), so "claimed" and "in a run" can never disagree, and a redelivered event finds
its version already claimed. (Not in the tracking table: a claim is no run, and every reader of
run items would have to learn to skip it.) The run and head items of those transactions are
built with the tracking table's own item builders (`pipeline.stores.tracking`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pipeline.jobs import RunRef, format_timestamp
from pipeline.status import JobStatus
from pipeline.stores._dynamodb import (
    TransactionCancelledError,
    batch_get,
    cancellations,
    from_item,
    get_each,
    is_condition_failure,
    to_attribute,
)
from pipeline.stores.tracking import HEAD_SORT_KEY, queued_run_item, run_expiry, run_key

if TYPE_CHECKING:  # only object claims (ingest's) need S3 versions: see `_object_version`
    from pipeline.s3events import ObjectVersion

CLAIM_KEY_PREFIX = "object#"
# The sparse index of the claims whose file has no known outcome yet (hash `unsettled`, a constant,
# range `claimed_at`): a claim is written in it, and leaves it when the reconciler settles it
# (monitors/reconcile/indicators.py), so finding lost files reads the files in flight, not the table.
UNSETTLED_INDEX = "unsettled-claims"
UNSETTLED = "claim"


def _object_version(sequencer: str = "", version_id: str = "") -> ObjectVersion:
    """An `ObjectVersion`, imported here: the router and the tracker see this module's types
    (through the store protocols) but never read a claim, so they do not load the S3 event parser
    (bench/imports.py)."""
    from pipeline.s3events import ObjectVersion

    return ObjectVersion(sequencer, version_id)


@dataclass(frozen=True)
class ObjectClaim:
    """The latest version of one S3 object that ingest put into a run, and that run.

    `revision` counts the claim's writes: each write is conditional on the revision it replaces,
    so of two deliveries racing on one object exactly one wins and the other decides again.
    """

    bucket: str
    key: str
    run: RunRef
    version: ObjectVersion = field(default_factory=_object_version)
    revision: int = 1

    @property
    def doc_key(self) -> str:
        return claim_key(self.bucket, self.key)

    def succeeded_by(self, run: RunRef, version: ObjectVersion) -> ObjectClaim:
        """The claim that replaces this one: `version` is in `run` now."""
        return ObjectClaim(self.bucket, self.key, run, version, self.revision + 1)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> ObjectClaim:
        data = from_item(item)
        return cls(
            bucket=data["bucket"],
            key=data["object_key"],
            run=RunRef(data["job_id"], data["run_started_at"]),
            version=_object_version(data.get("sequencer", ""), data.get("version_id", "")),
            revision=int(data["revision"]),
        )


@dataclass(frozen=True)
class UnsettledClaim:
    """A claim whose file's outcome the reconciler has not seen yet, as the index returns it."""

    bucket: str
    key: str
    run: RunRef
    revision: int
    claimed_at: str

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> UnsettledClaim:
        data = from_item(item)
        run = RunRef(data["job_id"], data["run_started_at"])
        return cls(data["bucket"], data["object_key"], run, int(data["revision"]), data["claimed_at"])


def claim_key(bucket: str, key: str) -> str:
    """Coordination-table key of an object's claim (bucket ≤ 63 + key ≤ 1024 bytes: fits 2048)."""
    return f"{CLAIM_KEY_PREFIX}{bucket}/{key}"


@dataclass(frozen=True)
class IngestView:
    """What ingest decides from, read in one call: the object's claim and its job's head."""

    claim: ObjectClaim | None
    pending: RunRef | None  # the job's run that still accepts files
    latest: str = ""  # the start of the job's latest run ("": none); a new run must start after it


class ClaimWrite(StrEnum):
    """What a transaction that puts a file into a run and claims the object did."""

    WRITTEN = "written"  # the file is in the run and the claim names it, atomically
    CLAIM_MOVED = "claim_moved"  # another delivery changed the claim first: decide again
    PENDING_MOVED = "pending_moved"  # the job got a pending run meanwhile: join that one
    RUN_EXISTS = "run_exists"  # a run with the candidate's start time exists already
    RUN_CLOSED = "run_closed"  # the pending run was frozen by the router (or is gone)
    CONFLICT = "conflict"  # a concurrent transaction touched the same items: try again


# What a ConditionalCheckFailed on each item of an ingest transaction means, by item role, in
# order of precedence when several items failed.
_CONDITION_FAILED = {
    "claim": ClaimWrite.CLAIM_MOVED,
    "head": ClaimWrite.PENDING_MOVED,
    "new_run": ClaimWrite.RUN_EXISTS,
    "pending_run": ClaimWrite.RUN_CLOSED,
}


def cancellation_outcome(codes: Sequence[str], roles: Sequence[str]) -> ClaimWrite:
    """Map a TransactionCanceledException's CancellationReasons codes (one per item, in order).

    A changed claim wins over everything else: the event may be a duplicate now, so the caller
    must decide again before looking at runs. A TransactionConflict (another transaction held an
    item) is worth an immediate new attempt; anything else (throttling, validation) raises, so the
    event source retries with its backoff. The message names codes only, never item data.
    """
    failed = {role for role, code in zip(roles, codes, strict=False) if code == "ConditionalCheckFailed"}
    for role, outcome in _CONDITION_FAILED.items():
        if role in failed:
            return outcome
    if "TransactionConflict" in codes and all(code in ("TransactionConflict", "None") for code in codes):
        return ClaimWrite.CONFLICT
    reasons = ", ".join(code for code in codes if code != "None") or "no reason given"
    raise TransactionCancelledError(f"transaction cancelled: {reasons}")


class ClaimsStore:
    """Reads of object claims, and ingest's two transactions that write a claim together with the
    run holding its file. Takes a boto3 DynamoDB client (moto drops in)."""

    def __init__(self, tracking_table: str, claims_table: str, client: Any) -> None:
        """`claims_table`: the coordination table; `tracking_table`: where the runs are."""
        self._table = tracking_table
        self._claims_table = claims_table
        self._client = client

    def claimed_runs(self, bucket: str, keys: Iterable[str]) -> dict[str, RunRef]:
        """Which run each object's claim names (objects with no claim are absent)."""
        doc_keys = [{"doc_key": {"S": claim_key(bucket, key)}} for key in dict.fromkeys(keys)]
        items = batch_get(self._client, self._claims_table, doc_keys)
        claims = (ObjectClaim.from_item(item) for item in items)
        return {claim.key: claim.run for claim in claims}

    def unsettled_claims(self, claimed_before: str, limit: int) -> list[UnsettledClaim]:
        """At most `limit` claims written before `claimed_before` and not settled, oldest first
        (the sparse index: never the whole table)."""
        found: list[UnsettledClaim] = []
        start: dict[str, Any] | None = None
        while len(found) < limit:
            request: dict[str, Any] = {
                "TableName": self._claims_table,
                "IndexName": UNSETTLED_INDEX,
                "KeyConditionExpression": "unsettled = :u AND claimed_at < :before",
                "ExpressionAttributeValues": {":u": {"S": UNSETTLED}, ":before": {"S": claimed_before}},
                "Limit": limit - len(found),
            }
            if start:
                request["ExclusiveStartKey"] = start
            response = self._client.query(**request)
            found += [UnsettledClaim.from_item(item) for item in response.get("Items", [])]
            start = response.get("LastEvaluatedKey")
            if not start:
                break
        return found

    def settle(self, claim: UnsettledClaim) -> bool:
        """Take a claim out of the unsettled index, only if it is still the revision read (a newer
        upload's claim stays in); False when it moved on or was settled already."""
        try:
            self._client.update_item(
                TableName=self._claims_table,
                Key={"doc_key": {"S": claim_key(claim.bucket, claim.key)}},
                UpdateExpression="REMOVE unsettled",
                ConditionExpression="revision = :r AND attribute_exists(unsettled)",
                ExpressionAttributeValues={":r": {"N": str(claim.revision)}},
            )
        except Exception as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def object_claim(self, bucket: str, key: str) -> ObjectClaim | None:
        """The object's claim as last written (a consistent read: a retry must see its first try)."""
        response = self._client.get_item(
            TableName=self._claims_table,
            Key={"doc_key": {"S": claim_key(bucket, key)}},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return ObjectClaim.from_item(item) if item else None

    def ingest_view(self, bucket: str, key: str, job_id: str) -> IngestView:
        """The object's claim and its job's head, in one consistent BatchGetItem (two tables)."""
        claims = self._claims_table
        keys = {claims: {"doc_key": {"S": claim_key(bucket, key)}}, self._table: run_key(job_id, HEAD_SORT_KEY)}
        found = get_each(self._client, keys)
        claim_item, head = found[claims], found[self._table] or {}
        pending = head.get("pending_started_at", {}).get("S")
        return IngestView(
            claim=ObjectClaim.from_item(claim_item) if claim_item else None,
            pending=RunRef(job_id, pending) if pending else None,
            latest=head.get("latest_started_at", {}).get("S", ""),
        )

    def open_run_with_claim(
        self, claim: ObjectClaim, bucket: str, now: datetime, announce_delay: int = 0
    ) -> ClaimWrite:
        """Atomically: write `claim.run` QUEUED holding the object, make it the job's pending run
        (only if the job has none), and write the claim (only if it is still at the revision the
        caller read). Nothing is written unless all three hold: no run without its pointer and
        claim, so nothing is left to clean up after a crash or a lost race. The head also leads to
        the new run (`latest_started_at`) in the same write: only a run later than the job's latest
        opens (else PENDING_MOVED: the caller reads the head again and picks a later start).
        """
        run = claim.run
        head = {
            "Update": {
                "TableName": self._table,
                "Key": run_key(run.job_id, HEAD_SORT_KEY),
                "UpdateExpression": "SET pending_started_at = :c, latest_started_at = :c, expiration_time = :exp",
                "ConditionExpression": (
                    "attribute_not_exists(pending_started_at)"
                    " AND (attribute_not_exists(latest_started_at) OR latest_started_at < :c)"
                ),
                "ExpressionAttributeValues": {":c": {"S": run.started_at}, ":exp": {"N": str(run_expiry(now))}},
            }
        }
        new_run = {
            "Put": {
                "TableName": self._table,
                "Item": queued_run_item(run, [claim.key], bucket, now, announce_delay=announce_delay),
                "ConditionExpression": "attribute_not_exists(job_id)",
            }
        }
        return self._transact([("new_run", new_run), ("head", head), ("claim", self._claim_put(claim, now))])

    def join_run_with_claim(self, claim: ObjectClaim, now: datetime, max_files: int | None = None) -> ClaimWrite:
        """Atomically: add the object to `claim.run` (only while it is QUEUED and, with
        `max_files`, holds fewer files than that or the key already) and write the claim (only if
        it is still at the revision the caller read). A full run answers RUN_CLOSED, as a frozen one."""
        run = claim.run
        condition = "attribute_exists(job_id) AND #status = :queued"
        values: dict[str, Any] = {
            ":k": {"SS": [claim.key]},
            ":now": {"S": format_timestamp(now)},
            ":queued": {"S": JobStatus.QUEUED.value},
        }
        if max_files is not None:
            # size() of a string set counts its keys; a key already in the run (a newer version
            # of it) stays with it, so the run's size cannot pass the maximum.
            condition += " AND (size(files) < :max_files OR contains(files, :key))"
            values |= {":max_files": {"N": str(max_files)}, ":key": {"S": claim.key}}
        add = {
            "Update": {
                "TableName": self._table,
                "Key": run_key(run.job_id, run.started_at),
                "UpdateExpression": "ADD files :k SET updated_at = :now",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": values,
            }
        }
        return self._transact([("pending_run", add), ("claim", self._claim_put(claim, now))])

    def _claim_put(self, claim: ObjectClaim, now: datetime) -> dict[str, Any]:
        item: dict[str, Any] = {
            "doc_key": claim.doc_key,
            "bucket": claim.bucket,
            "object_key": claim.key,
            "job_id": claim.run.job_id,
            "run_started_at": claim.run.started_at,
            "revision": claim.revision,
            "claimed_at": format_timestamp(now),
            "unsettled": UNSETTLED,  # in the unsettled index until the reconciler sees its outcome
            "expiration_time": run_expiry(now),  # as long as the run it names: outlives any redelivery
        }
        if claim.version.sequencer:
            item["sequencer"] = claim.version.sequencer
        if claim.version.version_id:
            item["version_id"] = claim.version.version_id
        put: dict[str, Any] = {
            "TableName": self._claims_table,
            "Item": {k: to_attribute(v) for k, v in item.items()},
        }
        if claim.revision <= 1:
            put["ConditionExpression"] = "attribute_not_exists(doc_key)"
        else:
            put["ConditionExpression"] = "revision = :previous"
            put["ExpressionAttributeValues"] = {":previous": {"N": str(claim.revision - 1)}}
        return {"Put": put}

    def _transact(self, items: Sequence[tuple[str, dict[str, Any]]]) -> ClaimWrite:
        try:
            self._client.transact_write_items(TransactItems=[item for _, item in items])
        except Exception as exc:
            reasons = cancellations(exc)
            if reasons is None:
                raise
            return cancellation_outcome([reason.code for reason in reasons], [role for role, _ in items])
        return ClaimWrite.WRITTEN
