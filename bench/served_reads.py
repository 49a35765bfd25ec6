"""The CLI against a served sandbox, as a user runs it: whole processes, a sandbox that has aged,
and 100,000 run records with writes flowing. Reported, not judged: every time
here is the simulator's as much as the command's (the items a command reads are bench.status_scale's
goal, and the simulator's speed is not one; see bench.goals).

    .venv/bin/python -m bench.served_reads                    # ~10 minutes on 2 busy cores
    .venv/bin/python -m bench.served_reads --records 20000 --repeat 2 --out /tmp/perf.md

Writes its own section of docs/PERFORMANCE.md (`<!-- bench:served-reads -->`, see bench.sections).

1. `pipeops sandbox up --json` in its own process (default time scale, 20 virtual minutes a real
   minute); every command below is `pipeops ...` in a process of its own against its endpoint, timed
   from spawn to exit (`pipeops version` too).
2. Fresh: a few jobs run, then `pipeops dashboard render` (the default 3-hour window) and `pipeops
   status`, `--repeat` times each.
3. Aged: traffic flows (a file uploaded every `UPLOAD_EVERY` s) for `--observe` real seconds; the
   datapoints the sandbox gathered meanwhile are counted per metric through its own API (ListMetrics,
   then GetMetricData SampleCount and Average over the window) and the same metrics are then loaded
   with as many datapoints as `--age-minutes` real minutes of serving gather at that rate, spread
   over the last `--age-minutes` (PutMetricData, each metric at its observed average): the volume of
   a sandbox served that long. Only the metrics are aged so: executions, items and objects are those
   of the minutes actually served. Then render and status again, traffic still flowing.
4. 100,000 run records (bench.status_scale's mix) written into the served tracking table, then, with
   traffic and a writer updating a seeded record every `WRITE_EVERY` s, `pipeops status`, `pipeops
   jobs` and `pipeops reconcile` (a dry run).
The sandbox's stderr is kept: moto tracebacks in it are counted.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.goal_row import GoalRow
from bench.sections import write_section

SECTION = "served-reads"
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "docs" / "PERFORMANCE.md"
PIPEOPS = str(Path(sys.executable).with_name("pipeops"))
UPLOAD_EVERY = 2.0  # real seconds between uploaded files while traffic flows
WRITE_EVERY = 0.1  # real seconds between writes to seeded records
BATCH = 1000  # PutMetricData's limit


@dataclass
class Timing:
    what: str
    seconds: list[float]  # wall, spawn to exit
    codes: list[int]
    client_cpu: list[float] = field(default_factory=list)  # the pipeops process's user + system CPU
    server_cpu: list[float] = field(default_factory=list)  # the sandbox process's CPU meanwhile

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def text(self) -> str:
        cpu = ""
        if self.client_cpu:
            cpu = (f"; CPU of the pipeops process {statistics.median(self.client_cpu):.2f} s, of the sandbox "
                   f"meanwhile {statistics.median(self.server_cpu):.2f} s (medians)")
        return (f"{self.median:.2f} s wall (median of {len(self.seconds)}: "
                f"{', '.join(f'{s:.2f}' for s in self.seconds)}){cpu}")


@dataclass
class Results:
    started_at: str = ""
    version: Timing | None = None
    fresh: dict[str, Timing] = field(default_factory=dict)
    aged: dict[str, Timing] = field(default_factory=dict)
    large: dict[str, Timing] = field(default_factory=dict)
    observed_seconds: float = 0.0
    observed_datapoints: int = 0
    loaded_datapoints: int = 0
    load_seconds: float = 0.0
    age_minutes: float = 0.0
    records: int = 0
    seed_seconds: float = 0.0
    writes: int = 0
    uploads: int = 0
    tracebacks: int = 0
    load: str = ""
    idle_fresh: float = 0.0  # share of a core the sandbox used idle (no traffic, no command), fresh
    idle_aged: float = 0.0  # the same once aged


def idle_share(server: int, seconds: float = 10.0) -> float:
    """The share of one core the sandbox process uses over `seconds` with nothing asked of it."""
    before = process_cpu(server)
    time.sleep(seconds)
    return (process_cpu(server) - before) / seconds


# --------------------------------------------------------------------------- processes


def _environment(endpoint: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"AWS_ACCESS_KEY_ID": "sandbox", "AWS_SECRET_ACCESS_KEY": "sandbox", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1", "COLUMNS": "200"}
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return env


def process_cpu(pid: int | None) -> float:
    """User + system CPU seconds of process `pid` so far (0 where /proc is not there)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_cli(
    args: Sequence[str], endpoint: str | None, server: int | None = None, timeout: float = 300.0
) -> tuple[float, int, str, float, float]:
    """`pipeops args...` as its own process: (seconds from spawn to exit, exit code, stdout, its CPU
    seconds, the CPU seconds the sandbox process `server` used meanwhile)."""
    before, server_before = os.times(), process_cpu(server)
    started = time.perf_counter()
    process = subprocess.run(
        [PIPEOPS, *args], env=_environment(endpoint), capture_output=True, text=True, timeout=timeout, check=False
    )
    seconds = time.perf_counter() - started
    after, server_after = os.times(), process_cpu(server)
    client = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    if process.returncode not in (0, 1):
        raise RuntimeError(f"pipeops {' '.join(args)} exited {process.returncode}: {process.stderr.strip()[-400:]}")
    return seconds, process.returncode, process.stdout, client, server_after - server_before


def timed(what: str, args: Sequence[str], endpoint: str | None, repeat: int, server: int | None = None) -> Timing:
    runs = [run_cli(args, endpoint, server) for _ in range(repeat)]
    return Timing(what, [r[0] for r in runs], [r[1] for r in runs], [r[3] for r in runs], [r[4] for r in runs])


@contextmanager
def served_sandbox(log: Path) -> Iterator[dict[str, Any]]:
    """`pipeops sandbox up --json` in its own process; its info once ready; stopped by its pid."""
    with log.open("w", encoding="utf-8") as errors:
        process = subprocess.Popen(
            [PIPEOPS, "sandbox", "up", "--json"], env=_environment(None), stdout=subprocess.PIPE,
            stderr=errors, text=True,
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(f"the sandbox did not start: {log.read_text(encoding='utf-8')[-800:]}")
            yield json.loads(line) | {"pid": process.pid}
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _client(service: str, endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(  # type: ignore[call-overload]  # a service named at run time: the stubs type literal names only
        service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="sandbox",
        aws_secret_access_key="sandbox", config=Config(retries={"max_attempts": 2}, read_timeout=300),
    )


class Background:
    """Traffic while measuring: a file uploaded every UPLOAD_EVERY s; optionally a seeded record
    updated every WRITE_EVERY s. Counts what it did; errors are counted, never raised."""

    def __init__(self, endpoint: str, outputs: dict[str, str], records: int = 0) -> None:
        self._s3 = _client("s3", endpoint)
        self._dynamodb = _client("dynamodb", endpoint)
        self._outputs = outputs
        self._records = records
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.uploads = self.writes = self.errors = 0

    def __enter__(self) -> Background:
        self._threads = [threading.Thread(target=self._upload, daemon=True)]
        if self._records:
            self._threads.append(threading.Thread(target=self._write, daemon=True))
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _upload(self) -> None:
        while not self._stop.wait(UPLOAD_EVERY):
            try:
                key = f"bench-traffic/{time.time_ns()}.txt"
                self._s3.put_object(Bucket=self._outputs["InputBucketName"], Key=key,
                                    Body=b"Call 555-987-6543 or mail someone@corp.example.\n")
                self.uploads += 1
            except Exception:
                self.errors += 1

    def _write(self) -> None:
        from bench.status_scale import RUNS_PER_JOB
        from pipeline.stores.tracking import HEAD_SORT_KEY

        rng = random.Random(7)
        while not self._stop.wait(WRITE_EVERY):
            index = rng.randrange(self._records)
            try:
                self._dynamodb.update_item(
                    TableName=self._outputs["TrackingTableName"],
                    Key={"job_id": {"S": f"bench/batch-{index // RUNS_PER_JOB:06d}/"}, "started_at": {"S": HEAD_SORT_KEY}},
                    UpdateExpression="SET bench_touched = :t",
                    ExpressionAttributeValues={":t": {"N": str(time.time())}},
                )
                self.writes += 1
            except Exception:
                self.errors += 1


# --------------------------------------------------------------------------- ageing the metrics


def observed_metrics(cloudwatch: Any, start: dt.datetime, end: dt.datetime) -> list[tuple[dict[str, Any], int, float]]:
    """Every metric with datapoints in [start, end): (metric, datapoints, average), read through the API."""
    metrics = [m for page in cloudwatch.get_paginator("list_metrics").paginate() for m in page["Metrics"]]
    period = max(60, int((end - start).total_seconds()) // 60 * 60 + 60)
    found = []
    for first in range(0, len(metrics), 250):
        batch = metrics[first : first + 250]
        queries = [
            {"Id": f"{kind}{n}", "MetricStat": {"Metric": metric, "Period": period, "Stat": stat}}
            for n, metric in enumerate(batch)
            for kind, stat in (("c", "SampleCount"), ("a", "Average"))
        ]
        results = cloudwatch.get_metric_data(MetricDataQueries=queries, StartTime=start, EndTime=end)["MetricDataResults"]
        values = {r["Id"]: sum(r["Values"]) for r in results}
        for n, metric in enumerate(batch):
            count = int(values.get(f"c{n}", 0))
            if count:
                found.append((metric, count, values.get(f"a{n}", 0.0)))
    return found


def load_metrics(
    cloudwatch: Any, observed: list[tuple[dict[str, Any], int, float]], scale: float, minutes: float, end: dt.datetime
) -> int:
    """Each observed metric given `scale` times its datapoints, spread over the `minutes` before `end`."""
    rng = random.Random(19)
    by_namespace: dict[str, list[dict[str, Any]]] = {}
    for metric, count, average in observed:
        for _ in range(round(count * scale)):
            at = end - dt.timedelta(seconds=rng.uniform(5, minutes * 60))
            by_namespace.setdefault(metric["Namespace"], []).append(
                {"MetricName": metric["MetricName"], "Dimensions": metric.get("Dimensions", []), "Timestamp": at,
                 "Value": float(average)}
            )
    loaded = 0
    for namespace, data in by_namespace.items():
        for first in range(0, len(data), BATCH):
            cloudwatch.put_metric_data(Namespace=namespace, MetricData=data[first : first + BATCH])
            loaded += len(data[first : first + BATCH])
    return loaded


# --------------------------------------------------------------------------- the run


def run(repeat: int, observe: float, age_minutes: float, records: int, say: Callable[[str], None]) -> Results:
    from bench.status_scale import seed

    results = Results(started_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), age_minutes=age_minutes,
                      records=records)
    if hasattr(os, "getloadavg"):
        results.load = " / ".join(f"{value:.2f}" for value in os.getloadavg())
    results.version = timed("pipeops version", ["version"], None, max(repeat, 5))
    say(f"pipeops version: {results.version.text()}")
    out = Path(tempfile.mkdtemp(prefix="served-reads-"))
    log = out / "sandbox.stderr"
    render = ["dashboard", "render", "--out", str(out / "ops.html"), "--json"]
    with served_sandbox(log) as info:
        endpoint, outputs, server = info["endpoint_url"], info["outputs"], info["pid"]
        say(f"sandbox serving at {endpoint}")
        s3 = _client("s3", endpoint)
        for n in range(5):
            s3.put_object(Bucket=outputs["InputBucketName"], Key=f"bench-fresh/{n}.txt", Body=b"mail a@corp.example\n")
        time.sleep(15)
        results.idle_fresh = idle_share(server)
        for what, args in (("dashboard render", render), ("status", ["status", "--json"])):
            results.fresh[what] = timed(what, args, endpoint, repeat, server)
            say(f"fresh {what}: {results.fresh[what].text()}")

        cloudwatch = _client("cloudwatch", endpoint)
        with Background(endpoint, outputs) as traffic:
            began = dt.datetime.now(dt.UTC)
            time.sleep(observe)
            now = dt.datetime.now(dt.UTC)
            observed = observed_metrics(cloudwatch, began, now)
            results.observed_seconds = (now - began).total_seconds()
            results.observed_datapoints = sum(count for _, count, _ in observed)
            scale = age_minutes * 60 / results.observed_seconds - 1  # what was served already counts
            started = time.perf_counter()
            results.loaded_datapoints = load_metrics(cloudwatch, observed, scale, age_minutes, now)
            results.load_seconds = time.perf_counter() - started
            say(f"observed {results.observed_datapoints:,} datapoints in {results.observed_seconds:.0f} s; loaded "
                f"{results.loaded_datapoints:,} more ({age_minutes:g} minutes' worth) in {results.load_seconds:.0f} s")
            for what, args in (("dashboard render", render), ("status", ["status", "--json"])):
                results.aged[what] = timed(what, args, endpoint, repeat, server)
                say(f"aged {what}: {results.aged[what].text()}")
            results.uploads += traffic.uploads
        time.sleep(5)  # the last uploads' jobs end
        results.idle_aged = idle_share(server)
        say(f"sandbox idle: {results.idle_fresh:.0%} of a core fresh, {results.idle_aged:.0%} aged")

        dynamodb = _client("dynamodb", endpoint)
        started = time.perf_counter()
        now = dt.datetime.now(dt.UTC)
        seed(dynamodb, outputs["TrackingTableName"], 0, records, now,
             lambda written: say(f"  seeded {written:,} records ({time.perf_counter() - started:.0f} s)"))
        results.seed_seconds = time.perf_counter() - started
        with Background(endpoint, outputs, records) as traffic:
            time.sleep(5)
            for what, args in (("status", ["status", "--json"]), ("jobs", ["jobs", "--json"]),
                               ("reconcile", ["reconcile", "--json"])):
                results.large[what] = timed(what, args, endpoint, repeat, server)
                say(f"{records:,} records, writes flowing: {what}: {results.large[what].text()}")
            results.writes, results.uploads = traffic.writes, results.uploads + traffic.uploads
    results.tracebacks = log.read_text(encoding="utf-8", errors="replace").count("Traceback (most recent call last)")
    say(f"moto tracebacks in the sandbox's stderr: {results.tracebacks}")
    return results


# --------------------------------------------------------------------------- report


def rows(results: Results) -> list[GoalRow]:
    """The reported rows (no goal: goal "-"). Pure."""
    assert results.version is not None
    found = [GoalRow("`pipeops version`, whole process", f"{results.version.median:.2f} s", "-", True, results.version.text())]
    for what in ("dashboard render", "status"):
        fresh, aged = results.fresh[what], results.aged[what]
        found.append(GoalRow(
            f"`pipeops {what}` on a sandbox aged {results.age_minutes:g} minutes vs fresh",
            f"{aged.median / fresh.median:.2f}x ({aged.median:.2f} s vs {fresh.median:.2f} s)", "-", True,
            f"fresh {fresh.text()}; aged {aged.text()}",
        ))
    for what, timing in results.large.items():
        found.append(GoalRow(
            f"`pipeops {what}` against a served sandbox with {results.records:,} records, writes flowing",
            f"{timing.median:.2f} s (max {max(timing.seconds):.2f})", "-", True, f"{timing.text()}; exit codes {timing.codes}",
        ))
    return found


def figures(results: Results) -> list[tuple[str, str]]:
    """How the run went, as (figure, value): what the hand-written method beside the section refers to. Pure."""
    return [
        (
            f"traffic observed (a file every {UPLOAD_EVERY:g} s): real seconds, datapoints",
            f"{results.observed_seconds:.0f} s, {results.observed_datapoints:,}",
        ),
        ("datapoints loaded to age the metrics (PutMetricData seconds)", f"{results.loaded_datapoints:,} ({results.load_seconds:.0f} s)"),
        ("run records written with BatchWriteItem (seconds)", f"{results.records:,} ({results.seed_seconds:.0f} s)"),
        (f"writes to seeded records while timing (every {WRITE_EVERY:g} s); files uploaded in all", f"{results.writes:,}; {results.uploads}"),
        ("the sandbox process idle for 10 s: share of a core, fresh / aged", f"{results.idle_fresh:.0%} / {results.idle_aged:.0%}"),
        ("moto tracebacks in the sandbox's stderr", str(results.tracebacks)),
    ]


def cpu_rows(results: Results) -> list[tuple[str, str, str, str]]:
    """(command, wall, the pipeops process's CPU, the sandbox's CPU meanwhile), medians, for the slow commands. Pure."""
    timed = [(f"{what} at {results.records:,} records", t) for what, t in results.large.items()]
    timed += [(f"{what}, aged", t) for what, t in results.aged.items()]
    return [
        (f"`pipeops {label}`", f"{t.median:.2f} s", f"{statistics.median(t.client_cpu):.2f} s", f"{statistics.median(t.server_cpu):.2f} s")
        for label, t in timed
        if t.client_cpu
    ]


def render(results: Results) -> str:
    """The `served-reads` section: tables only; how it is measured and what is slow are written by hand. Pure."""
    lines = [
        "## The CLI against a served sandbox: aged, and with 100,000 records",
        "",
        f"Measured by `python -m bench.served_reads` on {results.started_at} (load average at the start "
        f"{results.load or '?'}; a shared 2-core machine). Reported, not goals.",
        "",
        "| measure | now |",
        "|---|---|",
        *(f"| {row.measure} | {row.now} |" for row in rows(results)),
        "",
        "| figure | this run |",
        "|---|---|",
        *(f"| {name} | {value} |" for name, value in figures(results)),
        "",
        "| command | wall | the pipeops process's CPU | the sandbox's CPU meanwhile |",
        "|---|---:|---:|---:|",
        *(f"| {' | '.join(row)} |" for row in cpu_rows(results)),
        "",
        "Details: " + "; ".join(f"**{row.measure}**: {row.detail}" for row in rows(results)),
    ]
    return "\n".join(lines)


def load_results(saved: dict[str, Any]) -> Results:
    """What `--json` wrote, back as Results. Pure."""
    def timings(group: dict[str, Any]) -> dict[str, Timing]:
        return {what: Timing(**timing) for what, timing in group.items()}

    fields = {k: v for k, v in saved.items() if k not in ("version", "fresh", "aged", "large")}
    return Results(**fields, version=Timing(**saved["version"]), fresh=timings(saved["fresh"]),
                   aged=timings(saved["aged"]), large=timings(saved["large"]))


def measure() -> list[GoalRow]:
    return rows(run(3, 60, 120, 100_000, lambda line: print(line, file=sys.stderr, flush=True)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.served_reads", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--observe", type=float, default=60.0, help="real seconds of traffic to count datapoints over")
    parser.add_argument("--age-minutes", type=float, default=120.0, help="real minutes of serving to age the metrics to")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--json", type=Path, default=None, help="also keep the results as JSON")
    parser.add_argument("--render", type=Path, default=None, help="only re-render the section from a --json file")
    args = parser.parse_args(argv)
    if args.render:
        results = load_results(json.loads(args.render.read_text(encoding="utf-8")))
    else:
        results = run(args.repeat, args.observe, args.age_minutes, args.records, lambda line: print(line, flush=True))
        if args.json:
            args.json.write_text(json.dumps(dataclasses.asdict(results), indent=2), encoding="utf-8")
    body = render(results)
    write_section(args.out, SECTION, body)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
