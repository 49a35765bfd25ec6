"""moto's DynamoDB Query made to cost what the matching items cost, not the table (issue 11).

Pinned to moto 5.2 (pyproject allows >=5.2.5,<5.3), like `sandbox.moto_seams`, which installs this
seam with its own. moto's `Table.query` takes every item of the table (`Table.all_items`, which
also sorts them all) and keeps those whose key matches: one indexed Query reading one item took
2.81 s at 100,000 items (bench/status_scale.py). AWS reads only the partition.

Here `Table.query` is still moto's own code (key and range conditions, sparse-index rules, sort,
ExclusiveStartKey, Limit and LastEvaluatedKey, ScannedCount, filters, projections, its errors): it
is only handed, where it asks for all the items, the items of the queried partition, the only ones
it would keep:
- a table Query gets the items stored under its hash key (moto's own dict, always current);
- an index Query gets its partition from a per-table cache of the index's items grouped by the
  index's hash-key values, holding only items with every key attribute of the index (the ones moto
  keeps), each group pre-sorted in moto's order (moto sorts it again, in linear time).
The cache is rebuilt lazily at the next index Query after any write: moto adds and removes items
only in `Table.put_item` / `Table.delete_item` (every API path: PutItem, BatchWriteItem,
transactions, PartiQL, UpdateItem of a new item), which invalidate that table's cache; UpdateItem
changes an item in place through `UpdateExpressionExecutor.execute` or
`Item.update_with_attribute_updates`, which do not know the table, so they invalidate every cache.
A transaction's rollback puts back a copy of the table (a new object, with no cache). moto does not
expire items by TTL, so that is no write path.

Counted installs (`sandbox.patches`); install after anything whose patches this stacks on and
uninstall before it (last on, first off). A wrapper left in place by a patch stacked on top of it
passes straight through once uninstalled. `moto_walk()` answers the current thread's Queries
with moto's own walk of the table (the differential test's and the benchmark's reference).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.patches import CountedPatches, Patch

_walk = threading.local()
_in_place_updates = itertools.count()  # next() is atomic: bumped by every in-place item update
_update_epoch = 0


@dataclass
class QueryStats:
    """What the seam did, for tests and the benchmark: items handed to moto's query logic, index
    caches built, Queries answered from a partition (vs. left to moto's walk of the table)."""

    handed: int = 0
    builds: int = 0
    partition_queries: int = 0

    def reset(self) -> None:
        self.handed = self.builds = self.partition_queries = 0


STATS = QueryStats()


# --------------------------------------------------------------------------- pure core


def index_keys(schema: Sequence[Mapping[str, str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(hash attribute names, range attribute names) of an index's key schema, in schema order."""
    hashes = tuple(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")
    ranges = tuple(k["AttributeName"] for k in schema if k["KeyType"] == "RANGE")
    return hashes, ranges


def group_by_partition(
    items: Iterable[Any], hash_names: Sequence[str], range_names: Sequence[str]
) -> dict[tuple[Hashable, ...], list[Any]]:
    """Items grouped by their values of `hash_names`, keeping only items with a (truthy) value for
    every hash and range name: exactly the items moto's indexed Query can keep."""
    groups: dict[tuple[Hashable, ...], list[Any]] = {}
    for item in items:
        attrs = item.attrs
        key = tuple(attrs.get(name) for name in hash_names)
        if not all(key) or not all(attrs.get(name) for name in range_names):
            continue
        groups.setdefault(key, []).append(item)
    return groups


def partition_key(
    hash_names: Sequence[str], conditions: Iterable[tuple[str, Any]] | None
) -> tuple[Hashable, ...] | None:
    """The group key a Query's hash-key conditions select, or None when they do not name exactly
    the index's hash attributes (moto's walk then decides, and words any error)."""
    by_name = dict(conditions or [])
    if not hash_names or set(by_name) != set(hash_names):
        return None
    return tuple(by_name[name] for name in hash_names)


def moto_key_attributes(table: Any, index: Any | None) -> tuple[list[str], list[str | None]]:
    """The (hash, range) attribute lists `Table.query` sorts and pages by, derived as it derives them."""
    if index is None:
        return [table.hash_key_attr], [table.range_key_attr]
    hash_names, range_names = index_keys(index.schema)
    ranges: list[str | None] = [*range_names] if range_names else [_index_range(table, index)]
    return [*hash_names, table.hash_key_attr], [*ranges, table.range_key_attr]


def _index_range(table: Any, index: Any) -> str:
    """The attribute moto compares an index Query's range condition on."""
    from moto.dynamodb.models.table import GlobalSecondaryIndex

    range_names = index_keys(index.schema)[1]
    if range_names:
        return range_names[0]
    return table.range_key_attr if isinstance(index, GlobalSecondaryIndex) and table.range_key_attr else table.hash_key_attr


def page_window(
    ordered: Sequence[Any],
    limit: int,
    matches: Callable[[Any], bool],
    after_start: Callable[[Any], bool] | None,
    contiguous: bool = False,
) -> list[Any]:
    """The part of a partition (in the Query's order) that moto's page loop looks at: from the
    ExclusiveStartKey (`after_start` is false for a prefix: bisected), without the leading items
    the range condition rejects (moto skips them uncounted), up to the `limit`-th match and one item
    more (moto's LastEvaluatedKey is set on meeting any item past the limit). When the partition is
    ordered by the condition's attribute (`contiguous`), its matches are one run: a rejected item
    after a match ends them, and moto would only skip the rest uncounted."""
    start = 0
    if after_start is not None:
        high = len(ordered)
        while start < high:
            middle = (start + high) // 2
            if after_start(ordered[middle]):
                high = middle
            else:
                start = middle + 1
    window: list[Any] = []
    found = 0
    for index in range(start, len(ordered)):
        item = ordered[index]
        if found == limit:
            window.append(item)
            break
        matched = matches(item)
        if window and not matched and contiguous:
            break
        if matched or window:
            window.append(item)
            found += matched
    return window


# --------------------------------------------------------------------------- per-table cache


class _IndexCache:
    """One table's index partitions, valid for one (writes, in-place update epoch) stamp."""

    def __init__(self) -> None:
        self.writes = 0
        self._stamp: tuple[int, int] | None = None
        self._indexes: dict[str, tuple[Hashable, dict[tuple[Hashable, ...], list[Any]], set[Any]]] = {}
        self._lock = threading.Lock()

    def partition(self, table: Any, index: Any, key: tuple[Hashable, ...]) -> tuple[list[Any], bool]:
        """The index partition `key` and whether it is in moto's order."""
        stamp = (self.writes, _update_epoch)  # read before building: a write meanwhile forces a rebuild
        hash_names, range_names = index_keys(index.schema)
        with self._lock:
            if stamp != self._stamp:
                self._indexes.clear()
                self._stamp = stamp
            entry = self._indexes.get(index.name)
            if entry is None or entry[0] != (hash_names, range_names):
                groups = group_by_partition(_stored_items(table), hash_names, range_names)
                entry = self._indexes[index.name] = ((hash_names, range_names), groups, set())
                STATS.builds += 1
            _, groups, sorted_keys = entry
            items = groups.get(key, [])
            if key not in sorted_keys and len(items) > 1:
                # moto's order, so that moto's own sort of the partition is a linear pass; where
                # that sort fails, moto's fails the same way, worded by moto
                with contextlib.suppress(KeyError, TypeError):
                    items.sort(key=_sort_key(table._generate_attr_to_sort_by(*moto_key_attributes(table, index))))
                    sorted_keys.add(key)
            return items, len(items) < 2 or key in sorted_keys


def _sort_key(attributes: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    return lambda item: tuple(item.attrs[name] for name in attributes)


def _stored_items(table: Any) -> Iterator[Any]:
    for stored in table.items.values():
        if table.range_key_attr:
            yield from stored.values()
        else:
            yield stored


_caches: dict[int, tuple[weakref.ref[Any], _IndexCache]] = {}
_CACHES_LOCK = threading.Lock()


def _cache_of(table: Any, create: bool) -> _IndexCache | None:
    entry = _caches.get(id(table))
    if entry is not None and entry[0]() is table:
        return entry[1]
    if not create:
        return None
    with _CACHES_LOCK:
        key = id(table)
        cache = _IndexCache()
        _caches[key] = (weakref.ref(table, lambda _ref, key=key: _caches.pop(key, None)), cache)
        return cache


def _table_written(table: Any) -> None:
    cache = _cache_of(table, create=False)
    if cache is not None:
        cache.writes += 1


def _item_updated() -> None:
    global _update_epoch
    _update_epoch = next(_in_place_updates) + 1


# --------------------------------------------------------------------------- the query seam


class _Partition:
    """moto's Table as `Table.query` sees it, except that `all_items` is the queried partition."""

    def __init__(self, table: Any, items: list[Any]) -> None:
        self._table = table
        self._items = items

    def all_items(self) -> list[Any]:
        STATS.handed += len(self._items)
        return list(self._items)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


def _candidates(table: Any, arguments: Mapping[str, Any]) -> list[Any] | None:
    """The items a Query's page can involve, or None to leave the Query to moto's walk."""
    index_name = arguments.get("index_name")
    index = None
    if not index_name:
        hash_key = arguments.get("hash_key")
        stored = table.items.get(hash_key) if hash_key is not None else None
        if stored is None:
            return None if hash_key is None else []
        items = list(stored.values()) if table.range_key_attr else [stored]
        try:
            items.sort(key=lambda item: item.range_key)
            ordered = True
        except TypeError:
            ordered = False
    else:
        index = {i.name: i for i in table.all_indexes()}.get(index_name)
        if index is None:
            return None
        key = partition_key(index_keys(index.schema)[0], arguments.get("hash_key_conditions"))
        if key is None:
            return None
        cache = _cache_of(table, create=True)
        assert cache is not None
        items, ordered = cache.partition(table, index, key)
    limit = arguments.get("limit")
    if not ordered or not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        return items
    if arguments.get("filter_kwargs") or len(arguments.get("range_key_conditions") or []) > 1:
        return items
    return _window(table, index, arguments, items, limit)


def _window(table: Any, index: Any | None, arguments: Mapping[str, Any], items: list[Any], limit: int) -> list[Any]:
    forward = arguments.get("scan_index_forward") is not False
    ordered = items if forward else items[::-1]
    start_key = arguments.get("exclusive_start_key")
    after_start = None
    if start_key is not None:
        hash_attrs, range_attrs = moto_key_attributes(table, index)

        def after_start(item: Any) -> bool:
            return not table._item_comes_before_dct(item, start_key, hash_attrs, range_attrs, forward)

    attribute = _range_attribute(table, index, arguments)
    sort_attributes = table._generate_attr_to_sort_by(*moto_key_attributes(table, index))
    partition_attributes = len(index_keys(index.schema)[0]) if index is not None else 1
    leading = sort_attributes[partition_attributes] if len(sort_attributes) > partition_attributes else None
    compared = attribute or (table.range_key_attr if index is None else None)
    contiguous = leading is not None and compared == leading
    try:
        window = page_window(ordered, limit, _range_matches(table, index, arguments), after_start, contiguous)
    except Exception:  # moto's own walk then meets it, and words it
        return items
    return window if forward else window[::-1]


def _range_attribute(table: Any, index: Any | None, arguments: Mapping[str, Any]) -> str | None:
    """The attribute moto compares a Query's range condition on (None: a table's range key)."""
    conditions = arguments.get("range_key_conditions")
    return conditions[-1][0] if conditions else (_index_range(table, index) if index is not None else None)


def _range_matches(table: Any, index: Any | None, arguments: Mapping[str, Any]) -> Callable[[Any], bool]:
    """moto's test of a Query's range condition on one item (`Table.query`'s page loop)."""
    comparison = arguments.get("range_comparison")
    values = arguments.get("range_objs")
    if not comparison:
        return lambda item: True
    attribute = _range_attribute(table, index, arguments)

    def matches(item: Any) -> bool:
        if attribute and item.attrs.get(attribute):
            return bool(item.attrs[attribute].compare(comparison, values))
        if index is None:
            return bool(item.range_key.compare(comparison, values))
        return False

    return matches


def _query(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _PATCHES.count or getattr(_walk, "on", False):
            return original(self, *args, **kwargs)
        candidates = _candidates(self, signature.bind(self, *args, **kwargs).arguments)
        if candidates is None:
            return original(self, *args, **kwargs)
        STATS.partition_queries += 1
        return original(_Partition(self, candidates), *args, **kwargs)

    return query


def _item_write(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def write(self: Any, *args: Any, **kwargs: Any) -> Any:
        _table_written(self)
        try:
            return original(self, *args, **kwargs)
        finally:
            _table_written(self)

    return write


def _in_place_update(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def update(self: Any, *args: Any, **kwargs: Any) -> Any:
        _item_updated()
        try:
            return original(self, *args, **kwargs)
        finally:
            _item_updated()

    return update


@contextlib.contextmanager
def moto_walk() -> Iterator[None]:
    """Answer this thread's Queries with moto's own walk of the table (the reference)."""
    previous = getattr(_walk, "on", False)
    _walk.on = True
    try:
        yield
    finally:
        _walk.on = previous


# --------------------------------------------------------------------------- install


def _patches() -> list[Patch]:
    """Every patch of this seam; the owners are moto's own."""
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import Table
    from moto.dynamodb.parsing.executors import UpdateExpressionExecutor

    return [
        Patch(Table, "query", _query),
        Patch(Table, "put_item", _item_write),
        Patch(Table, "delete_item", _item_write),
        Patch(UpdateExpressionExecutor, "execute", _in_place_update),
        Patch(Item, "update_with_attribute_updates", _in_place_update),
    ]


def _drop_caches() -> None:
    with _CACHES_LOCK:
        _caches.clear()


_PATCHES = CountedPatches(_patches, marker="__pipeops_seam__", after_uninstall=_drop_caches)


# The module's API: counted, one uninstall per install (`sandbox.patches`).
install, uninstall, installed = _PATCHES.install, _PATCHES.uninstall, _PATCHES.installed
