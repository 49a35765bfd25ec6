"""SPEED seam: moto's DynamoDB Query made to cost what the matching items cost, not the table.

Pinned to moto 5.2 (pyproject allows >=5.2.5,<5.3), like `sandbox.seams`, which installs this
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
  keeps), each group kept in moto's order (moto sorts it again, in linear time).
The cache is built at the table's first index Query (one walk of the table) and from then on kept
up to date per write: the item a write touched is taken out of the partitions it sat in and placed
where its attributes now put it (bisected into its group's order), so a write costs a few list
operations and a Query after it costs what it did before it (with 100,000 records every
write anywhere used to drop every cache, and the next Query walked the whole table again). moto adds
and removes items only in `Table.put_item` / `Table.delete_item` (every API path: PutItem,
BatchWriteItem, transactions and their rollback here, PartiQL, UpdateItem of a new item); UpdateItem
changes an item in place through `UpdateExpressionExecutor.execute` or
`Item.update_with_attribute_updates`, which know only the item: the cache that placed it is found by
the item's identity and checked against its table. moto does not expire items by TTL, so that is no
write path.

Counted installs (`sandbox.seams.patching`); install after anything whose patches this stacks on and
uninstall before it (last on, first off). A wrapper left in place by a patch stacked on top of it
passes straight through once uninstalled. `moto_walk()` answers the current thread's Queries
with moto's own walk of the table (the differential test's and the benchmark's reference).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import inspect
import itertools
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.seams.patching import CountedPatches, Patch

KIND = "SPEED"

_walk = threading.local()


@dataclass
class QueryStats:
    """What the seam did, for tests and the benchmark: items handed to moto's query logic, index
    caches built (one walk of the table each), item writes that kept a built cache up to date,
    Queries answered from a partition (vs. left to moto's walk of the table)."""

    handed: int = 0
    builds: int = 0
    kept: int = 0
    partition_queries: int = 0

    def reset(self) -> None:
        self.handed = self.builds = self.kept = self.partition_queries = 0


STATS = QueryStats()


# --------------------------------------------------------------------------- pure core


def index_keys(schema: Sequence[Mapping[str, str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(hash attribute names, range attribute names) of an index's key schema, in schema order."""
    hashes = tuple(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")
    ranges = tuple(k["AttributeName"] for k in schema if k["KeyType"] == "RANGE")
    return hashes, ranges


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


SortKey = tuple[Any, ...] | None  # an item's place in moto's order (plain values), None when it has none
PrimaryKey = tuple[Any, Any]  # (hash DynamoType, range DynamoType or None): a stored item's identity


class _Group:
    """One index partition: its items in moto's order (by `keys`, snapshots of each item's sort
    attributes taken when it was placed), or in no order once an item could not be placed by key."""

    __slots__ = ("items", "keys", "ordered")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.keys: list[SortKey] = []
        self.ordered = True

    def add(self, item: Any, key: SortKey) -> None:
        if self.ordered and key is not None:
            try:
                at = bisect.bisect_right(self.keys, key)  # type: ignore[type-var]  # mixed keys: TypeError below
            except TypeError:  # mixed types: moto's own sort fails the same way, worded by moto
                self.ordered = False
            else:
                self.keys.insert(at, key)
                self.items.insert(at, item)
                return
        self.ordered = False
        self.keys.append(key)
        self.items.append(item)

    def remove(self, item: Any, key: SortKey) -> None:
        start = 0
        if self.ordered and key is not None:
            with contextlib.suppress(TypeError):
                start = bisect.bisect_left(self.keys, key)  # type: ignore[type-var]  # mixed keys: TypeError suppressed
        for at in itertools.chain(range(start, len(self.items)), range(start)):
            if self.items[at] is item:
                del self.items[at]
                del self.keys[at]
                return


class _Index:
    """One index's partitions of one table, and where each stored item sits in them."""

    def __init__(self, spec: tuple[tuple[str, ...], tuple[str, ...]], sort_attributes: Sequence[str]) -> None:
        self.spec = spec
        self.sort_attributes = tuple(sort_attributes)
        self.groups: dict[tuple[Hashable, ...], _Group] = {}
        self.placed: dict[PrimaryKey, tuple[tuple[Hashable, ...], SortKey]] = {}

    def place(self, pk: PrimaryKey, item: Any) -> None:
        hash_names, range_names = self.spec
        group_key = partition_of(item.attrs, hash_names, range_names)
        if group_key is None:
            return
        key = sort_snapshot(item.attrs, self.sort_attributes)
        group = self.groups.get(group_key)
        if group is None:
            group = self.groups[group_key] = _Group()
        group.add(item, key)
        self.placed[pk] = (group_key, key)

    def unplace(self, pk: PrimaryKey, item: Any) -> None:
        where = self.placed.pop(pk, None)
        if where is not None:
            group = self.groups[where[0]]
            group.remove(item, where[1])
            if not group.items:
                del self.groups[where[0]]


class _IndexCache:
    """One table's index partitions, built at the table's first index Query and from then on kept
    up to date by every write of an item (placed again where its new attributes put it)."""

    def __init__(self, table: Any) -> None:
        self._table = weakref.ref(table)
        self._indexes: dict[str, _Index] = {}
        self._members: dict[PrimaryKey, Any] = {}  # every stored item, once an index is built
        self._lock = threading.RLock()

    def partition(self, table: Any, index: Any, key: tuple[Hashable, ...]) -> tuple[list[Any], bool]:
        """The index partition `key` (a copy) and whether it is in moto's order."""
        spec = index_keys(index.schema)
        with self._lock:
            built = self._indexes.get(index.name)
            if built is None or built.spec != spec:
                built = self._build(table, index, spec)
            group = built.groups.get(tuple(_plain(value) for value in key))
            if group is None:
                return [], True
            return list(group.items), group.ordered

    def _build(self, table: Any, index: Any, spec: tuple[tuple[str, ...], tuple[str, ...]]) -> _Index:
        sort_attributes = table._generate_attr_to_sort_by(*moto_key_attributes(table, index))
        built = _Index(spec, sort_attributes)
        if not self._indexes:
            self._members = {(item.hash_key, item.range_key): item for item in _stored_items(table)}
            for pk, item in self._members.items():
                _OWNERS[id(item)] = (self, pk)
        for pk, item in self._members.items():
            built.place(pk, item)
        self._indexes[index.name] = built
        STATS.builds += 1
        return built

    def written(self, pk: PrimaryKey) -> None:
        """The item stored under `pk` was put, replaced, deleted or changed: place it again."""
        table = self._table()
        if table is None:
            return
        with self._lock:
            if not self._indexes:
                return
            old = self._members.pop(pk, None)
            if old is not None:
                _OWNERS.pop(id(old), None)
                for built in self._indexes.values():
                    built.unplace(pk, old)
            current = _stored(table, pk)
            if current is not None:
                self._members[pk] = current
                _OWNERS[id(current)] = (self, pk)
                for built in self._indexes.values():
                    built.place(pk, current)
            STATS.kept += 1


def partition_of(attrs: Mapping[str, Any], hash_names: Sequence[str], range_names: Sequence[str]) -> tuple[Hashable, ...] | None:
    """The partition an item with `attrs` sits in (plain values), or None when moto's indexed Query
    would not keep it (a hash or range attribute missing or empty)."""
    values = [attrs.get(name) for name in hash_names]
    if not all(values) or not all(attrs.get(name) for name in range_names):
        return None
    return tuple(_plain(value) for value in values)


def sort_snapshot(attrs: Mapping[str, Any], names: Sequence[str]) -> SortKey:
    """An item's place in moto's order of a partition, as plain values (moto compares the attributes'
    `cast_value`s), or None when it lacks one of them."""
    try:
        return tuple(attrs[name].cast_value for name in names)
    except (KeyError, AttributeError, TypeError):
        return None


def _plain(value: Any) -> Hashable:
    return (value.type, value.cast_value)


def _stored_items(table: Any) -> Iterator[Any]:
    for stored in table.items.values():
        if table.range_key_attr:
            yield from stored.values()
        else:
            yield stored


def _stored(table: Any, pk: PrimaryKey) -> Any:
    if table.range_key_attr:
        stored = table.items.get(pk[0])
        return None if stored is None else stored.get(pk[1])
    return table.items.get(pk[0])


_caches: dict[int, tuple[weakref.ref[Any], _IndexCache]] = {}
_CACHES_LOCK = threading.Lock()
# id(stored item) -> the cache that placed it and its primary key: how an in-place update, which
# knows only the item, finds its table's cache (checked against the table before use)
_OWNERS: dict[int, tuple[_IndexCache, PrimaryKey]] = {}


def _cache_of(table: Any, create: bool) -> _IndexCache | None:
    entry = _caches.get(id(table))
    if entry is not None and entry[0]() is table:
        return entry[1]
    if not create:
        return None
    with _CACHES_LOCK:
        key = id(table)
        cache = _IndexCache(table)
        _caches[key] = (weakref.ref(table, lambda _ref: _caches.pop(key, None)), cache)
        return cache


def _table_written(table: Any, pk: PrimaryKey | None) -> None:
    cache = _cache_of(table, create=False)
    if cache is not None and pk is not None:
        cache.written(pk)


def _item_updated(item: Any) -> None:
    owner = _OWNERS.get(id(item))
    if owner is not None:
        cache, pk = owner
        table = cache._table()
        if table is not None and _stored(table, pk) is item:
            cache.written(pk)


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
    if ordered and limit is None:
        # No Limit: every match. Those of a range condition on the order's attribute are one run,
        # found as a page's are (a Select=COUNT over a big partition walked all of it: 8 s at 60k).
        limit = len(items)
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


def _item_put(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        stored = original(self, *args, **kwargs)  # raises before storing anything, or stores `stored`
        if _PATCHES.count and stored is not None:
            _table_written(self, (stored.hash_key, stored.range_key))
        return stored

    return put_item


def _item_delete(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def delete_item(self: Any, hash_key: Any, range_key: Any = None, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, hash_key, range_key, *args, **kwargs)
        finally:
            if _PATCHES.count:
                _table_written(self, (hash_key, range_key))

    return delete_item


def _in_place_update(item_of: Callable[[Any], Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def update(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return original(self, *args, **kwargs)
            finally:  # also after a partial update that raised: place the item as it now is
                if _PATCHES.count:
                    _item_updated(item_of(self))

        return update

    return wrap


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
        Patch(Table, "put_item", _item_put),
        Patch(Table, "delete_item", _item_delete),
        Patch(UpdateExpressionExecutor, "execute", _in_place_update(lambda executor: executor.item)),
        Patch(Item, "update_with_attribute_updates", _in_place_update(lambda item: item)),
    ]


def _drop_caches() -> None:
    with _CACHES_LOCK:
        _caches.clear()
        _OWNERS.clear()


_PATCHES = CountedPatches(_patches, marker="__pipeops_seam__", after_uninstall=_drop_caches)


# The module's API: counted, one uninstall per install (`sandbox.seams.patching`).
install, uninstall, installed = _PATCHES.install, _PATCHES.uninstall, _PATCHES.installed
