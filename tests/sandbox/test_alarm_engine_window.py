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


def test_running_totals_follow_late_datapoints_and_statistic_sets() -> None:
    from moto.cloudwatch.models import MetricAggregatedDatum

    index = _MetricIndex("123456789012")
    data = [datum(s) for s in (10, 30)]
    index.update(data)
    (key,) = index.by_metric
    assert index.totals(key, T0, T0 + dt.timedelta(minutes=1)) == (40.0, 2.0)  # builds the running totals
    data += [datum(20), datum(50)]  # a late one (rebuilt), then one in order (extended)
    data.append(
        MetricAggregatedDatum(
            "N", "M", min_stat=1, max_stat=9, sample_count=4, sum_stat=12, dimensions=[{"Name": "F", "Value": "f"}],
            timestamp=T0 + dt.timedelta(seconds=55),
        )
    )  # fmt: skip
    index.update(data)
    assert index.totals(key, T0 + dt.timedelta(seconds=15), T0 + dt.timedelta(seconds=50)) == (50.0, 2.0)
    assert index.totals(key, T0, T0 + dt.timedelta(minutes=1)) == (122.0, 8.0)
