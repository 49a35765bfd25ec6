"""CloudWatch metric math as pure functions: parse an expression once, evaluate it over series.

An alarm on metric math (PutMetricAlarm ``Metrics``) holds MetricStat queries, each a series of
one datapoint per period, and expressions over their ids. This module parses each expression
into a typed tree (`parse`), prints it back (`format_expression`), and evaluates it over series
aligned on the alarm's periods (`evaluate_expression`), so `alarms.evaluate` can judge such an
alarm offline as CloudWatch would.

Sources (AWS CloudWatch User Guide, "Using math expressions with CloudWatch metrics" and its
"Metric math syntax and functions"):
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html
and the message CloudWatch's GetMetricData returns when arithmetic leaves no number, "One or
more data-points have been dropped due to non-numeric values (NaN, -Infinite, +Infinite)"
(quoted in https://github.com/grafana/grafana/issues/78608).

The grammar and what each part does:

1. **Values.** A number (scalar); an id (``[a-z][A-Za-z0-9_]*``, the id of a query of the same
   alarm: a time series); ``[a, b]`` (an array of series, for SUM/AVG/MIN/MAX only).
2. **Arithmetic** ``+ - * /`` and unary minus. Series op scalar applies to each datapoint;
   series op series pairs datapoints by timestamp, and a timestamp present in only one of them
   has no result (that is what ``FILL`` is for). A result that is not a finite number (x / 0)
   is dropped, as GetMetricData's message above says.
3. **Comparisons** ``> >= < <= == !=`` and **logical** ``AND OR NOT`` (also ``&& || !``) give 1
   (true) or 0; a non-zero operand is true. Precedence, tightest first: unary minus and NOT;
   ``* /``; ``+ -``; comparisons; AND; OR. Binary operators are left-associative.
4. **FILL(x, v)** gives every period of the queried range a value: ``v`` (a number) where ``x``
   has none; ``REPEAT`` repeats the last earlier value (the first ones take the first value);
   ``LINEAR`` interpolates between neighbours (and repeats at the ends). A series with no
   datapoint in the range stays empty (``alarms.evaluate``, item 9).
5. **IF(c, a[, b])**: for each timestamp of ``c``, ``a``'s value there when ``c`` is true, else
   ``b``'s; without ``b`` a false condition gives no datapoint. A scalar ``c`` picks ``a`` or
   ``b`` whole.
6. **SUM/AVG/MIN/MAX**: of an array ``[a, b, ...]``, the series of the per-timestamp sum
   (average, ...) over the members that have a value there; of one series, a scalar over its
   datapoints (no datapoint: no value).

Anything else (other functions, strings, SEARCH, METRICS()) is refused at parse time with
`MetricMathError`, which names the function; `parse_queries` adds the alarm's name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = [
    "Binary",
    "Call",
    "MetricMathError",
    "Number",
    "Queries",
    "Ref",
    "Series",
    "SeriesList",
    "StatQuery",
    "Unary",
    "evaluate_expression",
    "evaluate_queries",
    "format_expression",
    "parse",
    "parse_queries",
    "references",
]

Series = dict[datetime, float]
Value = float | Series | list[Series]


class MetricMathError(ValueError):
    """An expression outside the supported grammar, or one that cannot be evaluated."""


@dataclass(frozen=True)
class Number:
    value: float


@dataclass(frozen=True)
class Ref:
    id: str


@dataclass(frozen=True)
class Unary:
    op: str  # "-" or "NOT"
    operand: Node


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / > >= < <= == != AND OR
    left: Node
    right: Node


@dataclass(frozen=True)
class Call:
    name: str  # FILL IF SUM AVG MIN MAX
    args: tuple[Node, ...]


@dataclass(frozen=True)
class SeriesList:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Keyword:
    """REPEAT or LINEAR, FILL's second argument."""

    name: str


Node = Number | Ref | Unary | Binary | Call | SeriesList | Keyword

FUNCTIONS = frozenset({"FILL", "IF", "SUM", "AVG", "MIN", "MAX"})
_KEYWORDS = frozenset({"REPEAT", "LINEAR"})
_ALIASES = {"&&": "AND", "||": "OR", "!": "NOT"}
_LEVELS: tuple[frozenset[str], ...] = (  # loosest first
    frozenset({"OR"}),
    frozenset({"AND"}),
    frozenset({">", ">=", "<", "<=", "==", "!="}),
    frozenset({"+", "-"}),
    frozenset({"*", "/"}),
)
_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>>=|<=|==|!=|&&|\|\||[-+*/><!(),\[\]]))"
)


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, position) for each token; MetricMathError on anything else."""
    found: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            start = len(text) - len(text[pos:].lstrip())
            raise MetricMathError(f"expression {text!r}: unexpected {text[start]!r} at position {start}")
        kind = match.lastgroup or "op"
        found.append((kind, match.group(kind), match.start(kind)))
        pos = match.end()
    return found


class _Parser:
    """Precedence climbing over the levels above; unary minus and NOT bind tightest."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0

    def fail(self, message: str) -> MetricMathError:
        where = self.tokens[self.at][2] if self.at < len(self.tokens) else len(self.text)
        return MetricMathError(f"expression {self.text!r}: {message} at position {where}")

    def peek(self) -> str | None:
        if self.at >= len(self.tokens):
            return None
        kind, token, _ = self.tokens[self.at]
        return _ALIASES.get(token, token) if kind != "number" else token

    def take(self, expected: str) -> None:
        if self.peek() != expected:
            raise self.fail(f"expected {expected!r}")
        self.at += 1

    def parse(self) -> Node:
        if not self.tokens:
            raise MetricMathError("expression is empty")
        node = self.binary(0)
        if self.at != len(self.tokens):
            raise self.fail(f"unexpected {self.tokens[self.at][1]!r}")
        return node

    def binary(self, level: int) -> Node:
        if level == len(_LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while self.peek() in _LEVELS[level]:
            op = str(self.peek())
            self.at += 1
            node = Binary(op, node, self.binary(level + 1))
        return node

    def unary(self) -> Node:
        if self.peek() in ("-", "NOT"):
            op = str(self.peek())
            self.at += 1
            return Unary(op, self.unary())
        if self.peek() == "+":
            self.at += 1
            return self.unary()
        return self.atom()

    def atom(self) -> Node:
        if self.at >= len(self.tokens):
            raise self.fail("unexpected end")
        kind, token, _ = self.tokens[self.at]
        self.at += 1
        if kind == "number":
            return Number(float(token))
        if token == "(":
            node = self.binary(0)
            self.take(")")
            return node
        if token == "[":
            return SeriesList(self.arguments("]"))
        if kind == "word":
            return self.word(token)
        self.at -= 1
        raise self.fail(f"unexpected {token!r}")

    def word(self, token: str) -> Node:
        if self.peek() == "(":
            if token not in FUNCTIONS:
                self.at -= 1
                raise self.fail(f"unsupported function {token!r} (supported: {', '.join(sorted(FUNCTIONS))})")
            self.at += 1
            return Call(token, self.arguments(")"))
        if token in _KEYWORDS:
            return Keyword(token)
        if not token[0].islower():
            self.at -= 1
            raise self.fail(f"unknown name {token!r} (an id starts with a lowercase letter)")
        return Ref(token)

    def arguments(self, closing: str) -> tuple[Node, ...]:
        items: list[Node] = []
        if self.peek() == closing:
            self.at += 1
            return ()
        while True:
            items.append(self.binary(0))
            if self.peek() == ",":
                self.at += 1
                continue
            self.take(closing)
            return tuple(items)


def _check_calls(node: Node, text: str) -> None:
    """Arity and argument kinds, so evaluation meets no malformed call."""
    match node:
        case Call(name, args):
            counts = {"FILL": (2,), "IF": (2, 3)}.get(name, (1,))
            if len(args) not in counts:
                raise MetricMathError(
                    f"expression {text!r}: {name} takes {' or '.join(map(str, counts))} arguments"
                )
            if name != "FILL" and any(isinstance(a, Keyword) for a in args):
                raise MetricMathError(
                    f"expression {text!r}: REPEAT/LINEAR only fill (FILL's second argument)"
                )
            if name == "FILL" and isinstance(args[0], Keyword):
                raise MetricMathError(f"expression {text!r}: FILL's first argument is a series")
            for arg in args:
                if not isinstance(arg, Keyword):
                    _check_calls(arg, text)
        case Keyword(name):
            raise MetricMathError(f"expression {text!r}: {name} is only FILL's second argument")
        case Unary(_, operand):
            _check_calls(operand, text)
        case Binary(_, left, right):
            _check_calls(left, text)
            _check_calls(right, text)
        case SeriesList(items):
            for item in items:
                _check_calls(item, text)


def parse(text: str) -> Node:
    """The expression's tree; MetricMathError (naming the function or token) outside the grammar."""
    node = _Parser(text).parse()
    _check_calls(node, text)
    return node


def format_expression(node: Node) -> str:
    """The expression as text that `parse` reads back to the same tree (fully parenthesized)."""
    match node:
        case Number(value):
            return repr(value) if value >= 0 else f"({value!r})"
        case Ref(id) | Keyword(id):
            return id
        case Unary(op, operand):
            return f"({op}{' ' if op == 'NOT' else ''}{format_expression(operand)})"
        case Binary(op, left, right):
            return f"({format_expression(left)} {op} {format_expression(right)})"
        case Call(name, args):
            return f"{name}({', '.join(format_expression(a) for a in args)})"
        case SeriesList(items):
            return f"[{', '.join(format_expression(i) for i in items)}]"
    raise TypeError(f"not an expression node: {node!r}")  # pragma: no cover


def references(node: Node) -> list[str]:
    """The ids an expression uses, in order, once each."""
    match node:
        case Ref(id):
            return [id]
        case Unary(_, operand):
            return references(operand)
        case Binary(_, left, right):
            return list(dict.fromkeys(references(left) + references(right)))
        case Call(_, items) | SeriesList(items):
            return list(dict.fromkeys(ref for item in items for ref in references(item)))
    return []


# --------------------------------------------------------------------------- evaluation


def _finite(value: float) -> bool:
    return math.isfinite(value)


def _apply(op: str, a: float, b: float) -> float:
    match op:
        case "+":
            return a + b
        case "-":
            return a - b
        case "*":
            return a * b
        case "/":
            return a / b if b != 0 else math.nan  # dropped by the caller
        case ">":
            return float(a > b)
        case ">=":
            return float(a >= b)
        case "<":
            return float(a < b)
        case "<=":
            return float(a <= b)
        case "==":
            return float(a == b)
        case "!=":
            return float(a != b)
        case "AND":
            return float(bool(a) and bool(b))
        case "OR":
            return float(bool(a) or bool(b))
    raise MetricMathError(f"unknown operator {op!r}")  # pragma: no cover - the parser makes none


def _combine(op: str, left: Value, right: Value) -> Value:
    if isinstance(left, list) or isinstance(right, list):
        raise MetricMathError(f"an array of series [..] cannot be an operand of {op!r}")
    if isinstance(left, dict) and isinstance(right, dict):
        pairs = ((t, _apply(op, v, right[t])) for t, v in left.items() if t in right)
    elif isinstance(left, dict):
        pairs = ((t, _apply(op, v, float(right))) for t, v in left.items())  # type: ignore[arg-type]
    elif isinstance(right, dict):
        pairs = ((t, _apply(op, float(left), v)) for t, v in right.items())
    else:
        result = _apply(op, left, right)
        if not _finite(result):
            raise MetricMathError(f"{left!r} {op} {right!r} is not a number")
        return result
    return {t: v for t, v in sorted(pairs) if _finite(v)}


def _fill(series: Series, how: Value | str, timestamps: Sequence[datetime]) -> Series:
    if not series:
        return {}  # nothing to fill (module docstring, 4.)
    known = sorted(series)
    if how == "REPEAT":
        out: Series = {}
        last = series[known[0]]
        for t in timestamps:
            last = series.get(t, last)
            out[t] = last
        return out | series
    if how == "LINEAR":
        return _linear(series, known, timestamps) | series
    if not isinstance(how, float | int):
        raise MetricMathError("FILL's second argument must be a number, REPEAT or LINEAR")
    return {t: series.get(t, float(how)) for t in timestamps} | series


def _linear(series: Series, known: list[datetime], timestamps: Sequence[datetime]) -> Series:
    out: Series = {}
    for t in timestamps:
        before = [k for k in known if k <= t]
        after = [k for k in known if k >= t]
        if not before or not after:
            out[t] = series[(after or before)[0] if not before else before[-1]]
            continue
        a, b = before[-1], after[0]
        span = (b - a).total_seconds()
        share = (t - a).total_seconds() / span if span else 0.0
        out[t] = series[a] + (series[b] - series[a]) * share
    return out


def _if(cond: Value, yes: Value, no: Value | None) -> Value:
    if isinstance(cond, list) or isinstance(yes, list) or isinstance(no, list):
        raise MetricMathError("IF does not take an array of series [..]")
    if not isinstance(cond, dict):
        chosen = yes if cond else no
        if chosen is None:
            return {}
        return chosen
    out: Series = {}
    for t, c in cond.items():
        branch = yes if c else no
        if branch is None:
            continue
        value = branch.get(t) if isinstance(branch, dict) else branch
        if value is not None:
            out[t] = float(value)
    return out


_REDUCERS: dict[str, Callable[[list[float]], float]] = {
    "SUM": math.fsum,
    "AVG": lambda values: math.fsum(values) / len(values),
    "MIN": min,
    "MAX": max,
}


def _reduce(name: str, value: Value) -> Value:
    reducer = _REDUCERS[name]
    if isinstance(value, list):
        stamps = sorted({t for series in value for t in series})
        return {t: reducer([s[t] for s in value if t in s]) for t in stamps}
    if isinstance(value, dict):
        if not value:
            raise MetricMathError(f"{name} of a series with no datapoint has no value")
        return reducer(list(value.values()))
    return float(value)


def evaluate_expression(node: Node, series: Mapping[str, Value], timestamps: Sequence[datetime]) -> Value:
    """The expression's value over ``series`` (id -> its datapoints by period start, or a scalar).

    ``timestamps`` are the periods of the queried range, oldest first: what FILL fills.
    """
    match node:
        case Number(value):
            return value
        case Ref(id):
            if id not in series:
                raise MetricMathError(f"unknown id {id!r}")
            return series[id]
        case Unary("-", operand):
            return _combine("*", evaluate_expression(operand, series, timestamps), -1.0)
        case Unary(_, operand):
            return _combine("==", evaluate_expression(operand, series, timestamps), 0.0)
        case Binary(op, left, right):
            return _combine(
                op,
                evaluate_expression(left, series, timestamps),
                evaluate_expression(right, series, timestamps),
            )
        case SeriesList(items):
            values = [evaluate_expression(item, series, timestamps) for item in items]
            if not all(isinstance(v, dict) for v in values):
                raise MetricMathError("an array [..] holds series only")
            return [v for v in values if isinstance(v, dict)]
        case Call(name, args):
            return _call(name, args, series, timestamps)
    raise MetricMathError(f"cannot evaluate {node!r}")


def _call(
    name: str, args: tuple[Node, ...], series: Mapping[str, Value], timestamps: Sequence[datetime]
) -> Value:
    if name == "FILL":
        target = evaluate_expression(args[0], series, timestamps)
        if not isinstance(target, dict):
            raise MetricMathError("FILL's first argument must be a series")
        how = args[1]
        filler: Value | str = (
            how.name if isinstance(how, Keyword) else evaluate_expression(how, series, timestamps)
        )
        return _fill(target, filler, timestamps)
    values = [evaluate_expression(arg, series, timestamps) for arg in args]
    if name == "IF":
        return _if(values[0], values[1], values[2] if len(values) == 3 else None)
    return _reduce(name, values[0])


# --------------------------------------------------------------------------- an alarm's queries


@dataclass(frozen=True)
class StatQuery:
    """One MetricStat query: the metric, its statistic and period (as DescribeAlarms lists it)."""

    id: str
    namespace: str
    metric_name: str
    dimensions: tuple[tuple[str, str], ...]
    statistic: str
    period_seconds: int
    unit: str | None = None


@dataclass(frozen=True)
class Queries:
    """An alarm's ``Metrics``: its MetricStat queries, its expressions (in an order where each
    comes after the ids it uses) and the id returning data."""

    stats: tuple[StatQuery, ...]
    expressions: tuple[tuple[str, Node], ...]
    returned: str

    @property
    def period_seconds(self) -> int:
        return self.stats[0].period_seconds


def _stat_query(alarm: str, query: Mapping[str, Any]) -> StatQuery:
    stat = query["MetricStat"]
    metric = stat.get("Metric") or {}
    if stat.get("Period") is None or not stat.get("Stat") or not metric.get("MetricName"):
        raise MetricMathError(
            f"alarm {alarm!r}: query {query.get('Id')!r} needs a Metric, a Period and a Stat"
        )
    return StatQuery(
        id=str(query["Id"]),
        namespace=str(metric.get("Namespace") or ""),
        metric_name=str(metric["MetricName"]),
        dimensions=tuple(sorted((str(d["Name"]), str(d["Value"])) for d in metric.get("Dimensions") or [])),
        statistic=str(stat["Stat"]),
        period_seconds=int(stat["Period"]),
        unit=stat.get("Unit") or None,
    )


def parse_queries(alarm: str, metrics: Sequence[Mapping[str, Any]]) -> Queries:
    """An alarm's ``Metrics`` parsed and checked: unique ids, one returning data, every id an
    expression uses defined, no cycle, every MetricStat of one period. MetricMathError, naming
    the alarm, otherwise."""
    try:
        return _parse_queries(alarm, metrics)
    except MetricMathError as exc:
        if str(exc).startswith(f"alarm {alarm!r}"):
            raise
        raise MetricMathError(f"alarm {alarm!r}: {exc}") from None


def _parse_queries(alarm: str, metrics: Sequence[Mapping[str, Any]]) -> Queries:
    ids = [str(q.get("Id")) for q in metrics]
    if len(set(ids)) != len(ids):
        raise MetricMathError("query ids must be unique")
    stats = tuple(_stat_query(alarm, q) for q in metrics if q.get("MetricStat"))
    trees = {str(q["Id"]): parse(str(q["Expression"])) for q in metrics if q.get("Expression")}
    returned = [str(q["Id"]) for q in metrics if q.get("ReturnData", True)]
    if len(returned) != 1:
        raise MetricMathError(f"exactly one query must return data (ReturnData), found {len(returned)}")
    if not stats:
        raise MetricMathError("no MetricStat query: nothing to evaluate")
    if len({s.period_seconds for s in stats}) != 1:
        raise MetricMathError("every MetricStat query must have the same Period")
    order: list[str] = []

    def visit(query_id: str, path: tuple[str, ...]) -> None:
        if query_id in path:
            raise MetricMathError(
                f"expressions refer to each other in a cycle: {' -> '.join((*path, query_id))}"
            )
        if query_id in order or query_id not in trees:
            return
        for used in references(trees[query_id]):
            if used not in ids:
                raise MetricMathError(f"expression {query_id!r} uses unknown id {used!r}")
            visit(used, (*path, query_id))
        order.append(query_id)

    for query_id in trees:
        visit(query_id, ())
    return Queries(stats, tuple((i, trees[i]) for i in order), returned[0])


def evaluate_queries(
    queries: Queries, series: Mapping[str, Series], timestamps: Sequence[datetime]
) -> Series:
    """The returned query's datapoints, given each MetricStat's (id -> datapoints by period)."""
    values: dict[str, Value] = {s.id: dict(series.get(s.id, {})) for s in queries.stats}
    for query_id, tree in queries.expressions:
        values[query_id] = evaluate_expression(tree, values, timestamps)
    result = values[queries.returned]
    if not isinstance(result, dict):
        raise MetricMathError(
            f"query {queries.returned!r} returns a scalar or an array; an alarm needs one series"
        )
    return result
