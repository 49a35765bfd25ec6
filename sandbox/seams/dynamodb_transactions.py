"""SPEED seam: TransactWriteItems that back up the items they name, not their whole tables.

moto backs up every table a transaction touches (`copy.deepcopy` of the `Table`, in
`DynamoDBBackend.transact_write_items`) before its first write, to roll back when one of its
conditions fails. The copy costs as much as the table is large: the tracking table keeps every run
and the coordination table every object claim, so each ingest and router transaction copied them
whole, and a run of n files cost O(n^2) (measured: 21% of the sandbox's CPU on 40 single-file
jobs, deepcopy the top entry of the profile).

This seam backs up what a transaction can change, the items it names (at most 100, one operation
an item), and on any refusal puts exactly those back: an item that was there is written back as it
was, one that was not is deleted. What the transaction answers is moto's own. It runs inside the
DynamoDB lock (`seams.dynamodb_atomic` wraps it), so no other write lands between the backup and the
restore, as AWS's isolation promises. moto's table copy is then skipped (`_ItemsNotTables`: moto's
`copy.deepcopy` hands a `Table` back as is; every other object, the single-item copy of
`update_item` included, is copied as before).
"""

from __future__ import annotations

import copy
import functools
import types
from collections.abc import Callable, Sequence
from typing import Any

from sandbox.seams.patching import Patch

KIND = "SPEED"

Backup = tuple[str, dict[str, Any], dict[str, Any] | None]  # table, key, attributes (None: absent)


def _key_of(backend: Any, table_name: str, operation: str, request: dict[str, Any]) -> dict[str, Any] | None:
    """The key an operation names (a Put names it inside its item); None for an unknown table
    (moto answers that one itself)."""
    if table_name not in backend.tables:
        return None
    if operation != "Put":
        return dict(request.get("Key") or {})
    table = backend.tables[table_name]
    item = request.get("Item") or {}
    names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
    return {name: item[name] for name in names if name in item}


def backups(backend: Any, transact_items: Sequence[dict[str, Any]]) -> list[Backup]:
    """Each named item as it is now (a fresh copy of its attributes, or None when absent)."""
    saved: list[Backup] = []
    for entry in transact_items:
        if len(entry) != 1:
            continue  # moto refuses it before writing anything
        operation, request = next(iter(entry.items()))
        table_name = request.get("TableName", "")
        key = _key_of(backend, table_name, operation, request)
        if key is None:
            continue
        try:
            item = backend.get_item(table_name, key)
        except Exception:  # a malformed key: moto refuses the transaction before any write
            continue
        saved.append((table_name, key, item.to_json()["Attributes"] if item is not None else None))
    return saved


def restore(backend: Any, saved: Sequence[Backup]) -> None:
    """Put every backed-up item back as it was (in reverse, so a key named twice ends as first seen)."""
    for table_name, key, attributes in reversed(saved):
        if attributes is None:
            table = backend.get_table(table_name)
            hash_key, range_key = backend.get_keys_value(table, key)
            if table.get_item(hash_key, range_key) is not None:
                table.delete_item(hash_key, range_key)
        else:
            backend.get_table(table_name).put_item(attributes)


def _journaled(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        saved = backups(self, transact_items)
        try:
            return original(self, transact_items, *args, **kwargs)
        except BaseException:
            restore(self, saved)
            raise

    return transact_write_items


def _deepcopy_but_tables(value: Any, memo: dict[int, Any] | None = None) -> Any:
    from moto.dynamodb.models.table import Table

    if isinstance(value, Table):
        return value  # the items it could change are backed up by `_journaled`
    return copy.deepcopy(value, memo)


# moto's `copy`, as `moto.dynamodb.models` sees it: every attribute the real module's, deepcopy aside.
_ItemsNotTables = types.SimpleNamespace(
    **{name: getattr(copy, name) for name in dir(copy) if not name.startswith("__")}
)
_ItemsNotTables.deepcopy = _deepcopy_but_tables


def patches() -> list[Patch]:
    """The transaction seam; install it *inside* the DynamoDB lock (listed before
    `dynamodb_atomic`'s patches, so the lock wraps it)."""
    from moto.dynamodb import models
    from moto.dynamodb.models import DynamoDBBackend

    return [
        Patch(DynamoDBBackend, "transact_write_items", _journaled),
        Patch(models, "copy", lambda _original: _ItemsNotTables),
    ]
