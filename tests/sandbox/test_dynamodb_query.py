"""sandbox.seams.dynamodb_query: moto's Query handed only the queried partition, with moto's own answers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing.executors import UpdateExpressionExecutor

from sandbox import seams
from sandbox.seams import dynamodb_query
from sandbox.seams.dynamodb_query import STATS, moto_walk

REGION = "us-east-1"
_names = itertools.count()

PKS = ["a", "b", "c"]
SKS = [0, 2, 10]  # few keys: writes meet the items already there
GHS = ["x", "y"]
GRS = ["1", "2", "3"]
INDEXES = [None, "by-g", "by-gh", "by-l"]


@pytest.fixture
def ddb(aws_env: None) -> Iterator[Any]:
    dynamodb_query.install()
    STATS.reset()
    try:
        with mock_aws():
            yield boto3.client("dynamodb", region_name=REGION)
    finally:
        dynamodb_query.uninstall()


def create_table(ddb: Any) -> str:
    """pk/sk (a number) with a sparse GSI (gh, gr), a hash-only GSI (gh) and a sparse LSI (pk, lr)."""
    name = f"diff-{next(_names)}"
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": a, "AttributeType": t}
            for a, t in (("pk", "S"), ("sk", "N"), ("gh", "S"), ("gr", "S"), ("lr", "S"))
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-g",
                "KeySchema": [{"AttributeName": "gh", "KeyType": "HASH"}, {"AttributeName": "gr", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": "by-gh",
                "KeySchema": [{"AttributeName": "gh", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
        LocalSecondaryIndexes=[
            {
                "IndexName": "by-l",
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "lr", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def key(pk: str, sk: int) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"N": str(sk)}}


def item(pk: str, sk: int, attrs: dict[str, str | None]) -> dict[str, Any]:
    return {**key(pk, sk), **{a: {"S": v} for a, v in attrs.items() if v is not None}, "n": {"N": str(sk * 7 % 5)}}


keys = st.tuples(st.sampled_from(PKS), st.sampled_from(SKS))
index_attrs = st.fixed_dictionaries(
    {"gh": st.none() | st.sampled_from(GHS), "gr": st.none() | st.sampled_from(GRS), "lr": st.none() | st.sampled_from(GRS)}
)
writes = st.one_of(
    st.tuples(st.just("put"), keys, index_attrs),
    st.tuples(st.just("set"), keys, st.just("gh"), st.sampled_from(GHS)),
    st.tuples(st.just("set"), keys, st.sampled_from(["gr", "lr"]), st.sampled_from(GRS)),
    st.tuples(st.just("remove"), keys, st.sampled_from(["gh", "gr", "lr"])),
    st.tuples(st.just("delete"), keys),
    st.tuples(st.just("batch"), st.lists(st.tuples(keys, st.none() | index_attrs), max_size=4, unique_by=lambda w: w[0])),
    st.tuples(st.just("transact"), st.lists(st.tuples(keys, index_attrs), min_size=1, max_size=3, unique_by=lambda w: w[0])),
)
queries = st.fixed_dictionaries(
    {
        "index": st.sampled_from(INDEXES),
        "hash": st.sampled_from(PKS + GHS),
        "forward": st.booleans(),
        "limit": st.none() | st.integers(1, 3),
        "range": st.none() | st.sampled_from(["<=", ">", "begins_with"]),
        "filter": st.booleans(),
        "count": st.booleans(),
    }
)
operations = st.lists(st.one_of(st.tuples(st.just("write"), writes), st.tuples(st.just("query"), queries)), max_size=30)


def apply(ddb: Any, table: str, write: tuple[Any, ...]) -> None:
    kind = write[0]
    if kind == "put":
        ddb.put_item(TableName=table, Item=item(*write[1], write[2]))
    elif kind == "set":
        (pk, sk), attr, value = write[1:]
        ddb.update_item(
            TableName=table, Key=key(pk, sk), UpdateExpression="SET #a = :v",
            ExpressionAttributeNames={"#a": attr}, ExpressionAttributeValues={":v": {"S": value}},
        )
    elif kind == "remove":
        (pk, sk), attr = write[1:]
        ddb.update_item(TableName=table, Key=key(pk, sk), UpdateExpression="REMOVE #a", ExpressionAttributeNames={"#a": attr})
    elif kind == "delete":
        ddb.delete_item(TableName=table, Key=key(*write[1]))
    elif kind == "batch":
        requests = [
            {"DeleteRequest": {"Key": key(*k)}} if attrs is None else {"PutRequest": {"Item": item(*k, attrs)}}
            for k, attrs in write[1]
        ]
        if requests:
            ddb.batch_write_item(RequestItems={table: requests})
    else:  # a transaction, cancelled (and rolled back) when its first item exists already
        (first, attrs), *rest = write[1]
        items = [{"Put": {"TableName": table, "Item": item(*first, attrs), "ConditionExpression": "attribute_not_exists(pk)"}}]
        items += [{"Put": {"TableName": table, "Item": item(*k, a)}} for k, a in rest]
        try:
            ddb.transact_write_items(TransactItems=items)
        except ClientError as error:
            assert error.response["Error"]["Code"] == "TransactionCanceledException"


def hash_key(index: str | None) -> str:
    return {None: "pk", "by-l": "pk"}.get(index, "gh")


def partitions(index: str | None) -> list[str]:
    """The hash values an index's items can have (a drawn query may ask for any other: always empty)."""
    return PKS if hash_key(index) == "pk" else GHS


def request(table: str, spec: dict[str, Any]) -> dict[str, Any]:
    index = spec["index"]
    hash_name = hash_key(index)
    range_name = {None: "sk", "by-g": "gr", "by-l": "lr"}.get(index)
    condition = "#h = :h"
    values: dict[str, Any] = {":h": {"S": spec["hash"]}}
    names = {"#h": hash_name}
    if spec["range"] and range_name:
        names["#r"] = range_name
        values[":r"] = {"N": "2"} if range_name == "sk" else {"S": "2"}
        if spec["range"] == "begins_with":
            values[":r"] = {"S": "2"} if range_name != "sk" else values[":r"]
            condition += " AND begins_with(#r, :r)" if range_name != "sk" else " AND #r >= :r"
        else:
            condition += f" AND #r {spec['range']} :r"
    params: dict[str, Any] = {
        "TableName": table, "KeyConditionExpression": condition, "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values, "ScanIndexForward": spec["forward"],
    }
    if index:
        params["IndexName"] = index
    if spec["limit"]:
        params["Limit"] = spec["limit"]
    if spec["filter"] and index != "by-gh":
        params["FilterExpression"] = "n < :n"
        values[":n"] = {"N": "3"}
    if spec["count"]:
        params["Select"] = "COUNT"
    return params


def pages(ddb: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Every page of a Query (at most 50), or the error moto answered."""
    answered: list[dict[str, Any]] = []
    start = None
    for _ in range(50):
        try:
            page = ddb.query(**params, **({"ExclusiveStartKey": start} if start else {}))
        except ClientError as error:
            return [{"error": error.response["Error"]}]
        page.pop("ResponseMetadata", None)
        answered.append(page)
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    return answered


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations)
@example([("write", ("put", ("a", 0), {"gh": "x", "gr": "1", "lr": None})), ("write", ("set", ("a", 0), "gh", "y"))])
@example([("write", ("put", ("a", 0), {"gh": "x", "gr": "1", "lr": "1"})), ("write", ("delete", ("a", 0)))])
@example([("write", ("batch", [(("a", 0), {"gh": "x", "gr": "1", "lr": None})])),
          ("write", ("transact", [(("a", 0), {"gh": "y", "gr": "2", "lr": None}), (("b", 2), {"gh": "y", "gr": "3", "lr": None})])),
          ("write", ("transact", [(("c", 0), {"gh": "y", "gr": "2", "lr": None})])),
          ("write", ("remove", ("c", 0), "gr"))])
def test_query_answers_as_moto_does(ddb: Any, ops: list[tuple[str, Any]]) -> None:
    table = create_table(ddb)
    try:
        for kind, op in ops + [("query", {**q, "hash": h}) for q in _final_queries() for h in partitions(q["index"])]:
            # after a write, the sparse index's partitions too (a cache kept across a write would miss it)
            specs = [{**_final_queries()[2], "hash": h, "limit": None} for h in GHS] if kind == "write" else [op]
            if kind == "write":
                apply(ddb, table, op)
            for spec in specs:
                params = request(table, spec)
                seamed = pages(ddb, params)
                with moto_walk():
                    assert seamed == pages(ddb, params), params
    finally:
        ddb.delete_table(TableName=table)


def _final_queries() -> list[dict[str, Any]]:
    """Every index, both directions, in pages of one: the final state checked whatever was drawn
    (each in every partition its items can be in; a partition no item can be in is the drawn queries' part)."""
    return [
        {"index": index, "forward": forward, "limit": 1, "range": None, "filter": False, "count": False}
        for index in INDEXES for forward in (True, False)
    ]


def test_an_index_query_is_handed_only_its_partition(ddb: Any) -> None:
    table = create_table(ddb)
    requests = [{"PutRequest": {"Item": item("a", n, {"gh": "y" if n % 50 == 0 else "x", "gr": "1"})}} for n in range(500)]
    for start in range(0, len(requests), 25):
        ddb.batch_write_item(RequestItems={table: requests[start : start + 25]})
    params = request(table, {"index": "by-g", "hash": "y", "forward": False, "limit": None, "range": None,
                             "filter": False, "count": False})
    STATS.reset()
    first = ddb.query(**params)
    assert (first["Count"], STATS.handed, STATS.builds) == (10, 10, 1)  # the cache is built once, at the first Query
    second = ddb.query(**params)
    assert (second["Items"], STATS.handed, STATS.builds) == (first["Items"], 20, 1)

    ddb.update_item(TableName=table, Key=key("a", 1), UpdateExpression="SET gh = :y", ExpressionAttributeValues={":y": {"S": "y"}})
    third = ddb.query(**params)
    # an in-place update moves the item into its new partition: the cache is kept, not built again
    assert (third["Count"], STATS.handed, STATS.builds, STATS.kept > 0) == (11, 31, 1, True)

    with moto_walk():
        STATS.reset()
        assert ddb.query(**params)["Items"] == third["Items"]
        assert STATS.handed == 0  # moto's walk of all 500


def test_a_table_query_is_handed_only_its_hash_key(ddb: Any) -> None:
    table = create_table(ddb)
    for pk, sk in itertools.product(PKS, range(20)):
        ddb.put_item(TableName=table, Item=item(pk, sk, {}))
    STATS.reset()
    query = {"TableName": table, "KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "b"}}}
    everything = ddb.query(**query)
    assert (everything["Count"], STATS.handed, STATS.builds) == (20, 20, 0)
    page = ddb.query(**query, Limit=5, ExclusiveStartKey=key("b", 6))
    # a page is handed its window: the 5 items after the start key and the one that sets LastEvaluatedKey
    assert (page["Count"], page["ScannedCount"], page["LastEvaluatedKey"], STATS.handed) == (5, 5, key("b", 11), 26)
    assert [i["sk"]["N"] for i in page["Items"]] == ["7", "8", "9", "10", "11"]


def test_a_limited_index_page_is_handed_its_window(ddb: Any) -> None:
    table = create_table(ddb)
    for pk, sk in itertools.product(PKS, range(4)):
        ddb.put_item(TableName=table, Item=item(pk, sk, {"gh": "x", "gr": str(sk)}))
    query = request(table, {"index": "by-g", "hash": "x", "forward": False, "limit": 2, "range": "<=",
                            "filter": False, "count": False})
    STATS.reset()
    first = ddb.query(**query)
    second = ddb.query(**query, ExclusiveStartKey=first["LastEvaluatedKey"])
    # partition "x" backwards: three "3"s, three "2"s, three "1"s, three "0"s; the range condition
    # (gr <= "2") rejects the leading "3"s, uncounted, so each page is its 2 matches and one more
    assert [i["gr"]["S"] for i in first["Items"] + second["Items"]] == ["2", "2", "2", "1"]
    assert (first["ScannedCount"], second["ScannedCount"], STATS.handed) == (2, 2, 6)


def test_uninstall_restores_moto_and_installs_are_counted(aws_env: None) -> None:
    patched = [(Table, "query"), (Table, "put_item"), (Table, "delete_item"),
               (UpdateExpressionExecutor, "execute"), (Item, "update_with_attribute_updates")]
    before = [owner.__dict__[name] for owner, name in patched]
    dynamodb_query.install()
    dynamodb_query.install()
    assert all(getattr(owner.__dict__[name], "__pipeops_seam__", False) for owner, name in patched)
    dynamodb_query.uninstall()
    assert dynamodb_query.installed()
    dynamodb_query.uninstall()
    assert not dynamodb_query.installed()
    assert [owner.__dict__[name] for owner, name in patched] == before


def test_the_seams_install_it(aws_env: None) -> None:
    seams.install()
    try:
        assert dynamodb_query.installed()
    finally:
        seams.uninstall()
    assert not dynamodb_query.installed()


def test_writes_keep_a_built_cache_without_walking_the_table_again(ddb: Any) -> None:
    table = create_table(ddb)
    for n in range(50):
        ddb.put_item(TableName=table, Item=item("a", n, {"gh": "x", "gr": str(n % 3 + 1)}))
    params = request(table, {"index": "by-g", "hash": "x", "forward": True, "limit": None, "range": None,
                             "filter": False, "count": False})
    ddb.query(**params)
    STATS.reset()
    ddb.put_item(TableName=table, Item=item("b", 1, {"gh": "x", "gr": "2"}))  # a new item
    ddb.put_item(TableName=table, Item=item("a", 3, {"gh": "y", "gr": "1"}))  # replaced: moves partition
    ddb.delete_item(TableName=table, Key=key("a", 4))
    ddb.update_item(TableName=table, Key=key("a", 5), UpdateExpression="REMOVE gr")  # leaves the sparse index
    ddb.update_item(TableName=table, Key=key("c", 9), UpdateExpression="SET gh = :x, gr = :r",
                    ExpressionAttributeValues={":x": {"S": "x"}, ":r": {"S": "3"}})  # a new item, then updated
    seamed = ddb.query(**params)["Items"]
    assert STATS.builds == 0 and STATS.kept >= 5
    with moto_walk():
        assert seamed == ddb.query(**params)["Items"]
    assert len(seamed) == 50 + 1 - 1 - 1 - 1 + 1
