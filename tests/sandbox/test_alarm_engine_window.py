"""The alarm engine's index keeps each metric's datapoints in time order, and an evaluation reads only
its window's datapoints (an aged sandbox re-read every metric's history each virtual minute)."""

from __future__ import annotations

import datetime as dt

from moto.cloudwatch.models import MetricDatum

from sandbox.alarm_engine import _MetricIndex

T0 = dt.datetime(2026, 1, 1, 12, 0)


def datum(seconds: float) -> MetricDatum:
    return MetricDatum("N", "M", seconds, [{"Name": "F", "Value": "f"}], T0 + dt.timedelta(seconds=seconds))


def test_the_index_keeps_each_metric_in_time_order_whatever_the_arrival_order() -> None:
    index = _MetricIndex("123456789012")
    data = [datum(s) for s in (10, 30, 20)]
    index.update(data)
    data += [datum(5), datum(40), datum(30)]
    index.update(data)
    (series,) = index.by_metric.values()
    assert [d.value for d in series] == [5, 10, 20, 30, 30, 40]
