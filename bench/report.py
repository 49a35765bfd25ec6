"""Renders the results of `bench.e2e` as the tables of its section of docs/PERFORMANCE.md.

Pure: results dict in, Markdown out. Tables only, and the figures the hand-written analysis next to
the section reads (`derived`): what they mean is written by hand, outside the markers, and no
generator overwrites it (bench.sections).
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_ENV_KEY = re.compile(r"'[A-Z][A-Z0-9_]{2,}'")

SECTION = "e2e"


# --------------------------------------------------------------------------- small helpers


def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def spread(values: Sequence[float | None], digits: int = 2) -> str:
    """'median (min-max)', or the single value, or '-'."""
    present = [v for v in values if v is not None]
    if not present:
        return "-"
    median = statistics.median(present)
    if len(present) == 1:
        return _num(median, digits)
    return f"{_num(median, digits)} ({_num(min(present), digits)}-{_num(max(present), digits)})"


def _range(values: Sequence[float], fmt: str = ".2f", suffix: str = "") -> str:
    """'a-b' for a spread, or one number when they agree at the shown precision."""
    low, high = format(min(values), fmt), format(max(values), fmt)
    return f"{low}{suffix}" if low == high else f"{low}-{high}{suffix}"


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    marks = {"l": "---", "r": "---:", "c": ":---:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _runs(config: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(config.get("runs", []))


def _timeouts(run: Mapping[str, Any]) -> int:
    return int(sum(f.get("timeouts", 0) for f in run.get("functions", {}).values()))


def _steady(config: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The runs without a Lambda timeout (whose wall time has no visibility-timeout tail), or all runs."""
    return [r for r in _runs(config) if not _timeouts(r)] or _runs(config)


def _jobs(run: Mapping[str, Any]) -> int:
    return int(run.get("run_statuses", {}).get("COMPLETE", 0)) or int(run.get("runs", 0))


def calls_per_job(config: Mapping[str, Any], origin: str) -> dict[tuple[str, str, str], float]:
    """{(component, service, operation): calls per completed job}, pooled over the config's runs."""
    totals: dict[tuple[str, str, str], int] = defaultdict(int)
    jobs = 0
    for run in _runs(config):
        jobs += _jobs(run)
        for row in run.get("calls", []):
            if row["origin"] == origin:
                totals[(row["component"], row["service"], row["operation"])] += int(row["calls"])
    if not jobs:
        return {}
    return {key: total / jobs for key, total in totals.items()}


def _per_job(config: Mapping[str, Any], value: Any) -> float | None:
    """Pooled (sum over runs of value(run)) / (sum of completed jobs)."""
    jobs = sum(_jobs(run) for run in _runs(config))
    if not jobs:
        return None
    total = 0.0
    for run in _runs(config):
        v = value(run)
        if v is None:
            return None
        total += v
    return total / jobs


def _function_total(run: Mapping[str, Any], key: str) -> float:
    return float(sum(f.get(key, 0) for f in run.get("functions", {}).values()))


def _state_median(config: Mapping[str, Any], state: str) -> float | None:
    samples = [t[state] for run in _runs(config) for t in run.get("state_times", []) if state in t]
    return statistics.median(samples) if samples else None


def _kb(size: float | None) -> str:
    return "-" if size is None else f"{size / 1024:.1f} KB"


# --------------------------------------------------------------------------- sections


def _stamp(meta: Mapping[str, Any]) -> list[str]:
    return [
        f"Measured by `{meta.get('command', 'python -m bench.e2e')}` on {meta.get('date', '?')} "
        f"({_num(meta.get('duration_s'), 0)} s). Reproduce: `.venv/bin/python -m bench.e2e`; `--quick` for a "
        "~1 minute run, `--help` for the options.",
        "",
    ]


def _machine(meta: Mapping[str, Any]) -> list[str]:
    load = f"{_fmt_loads(meta.get('load_start'))} at the start, {_fmt_loads(meta.get('load_end'))} at the end"
    rows = [
        ("cores", f"{meta.get('cores', '?')} ({meta.get('usable_cores', '?')} usable), {meta.get('cpu_model') or 'unknown CPU'}"),
        ("memory", f"{meta['memory_gb']} GB" if meta.get("memory_gb") else "-"),
        ("OS", str(meta.get("platform", "?"))),
        ("Python", str(meta.get("python", "?"))),
        ("moto / boto3 / botocore", f"{meta.get('moto', '?')} / {meta.get('boto3', '?')} / {meta.get('botocore', '?')}"),
        ("load average (1, 5, 15 min)", load),
    ]
    return ["## Machine", "", *_table(("", ""), rows, "ll"), ""]


def _method(results: Mapping[str, Any]) -> list[str]:
    """The run's parameters and configurations, as tables (how they are measured: the prose beside the section)."""
    meta = results.get("meta", {})
    configs = results.get("configs", [])
    settings: Mapping[str, Any] = next((run.get("settings", {}) for c in configs for run in _runs(c) if run.get("settings")), {})
    rows = [
        ("files per run (median size)", f"{meta.get('files', '?')} ({_kb(meta.get('bytes_median'))})"),
        ("files in folders", f"{round(100 * (1 - float(meta.get('root_share', 0))))}%, {meta.get('files_per_folder', '?')} a folder"),
        ("warm-up file before the timed window", "yes" if meta.get("warmup", True) else "no (`--no-warmup`)"),
        ("repetitions per configuration", f"{meta.get('repeat', '?')} (synthetic: as listed)"),
        ("time scale", str(meta.get("time_scale", "?"))),
        (
            "FolderSettleSeconds / CapacityRetrySeconds, as deployed",
            f"{_num(settings.get('folder_settle_seconds'), 0)} s / {_num(settings.get('capacity_retry_seconds'), 0)} s",
        ),
        (
            "router batching window (batch size)",
            f"{_num(settings.get('router_batching_window_real_s'))} s ({settings.get('router_batch_size', '?')})",
        ),
        (
            "router timeout / main-queue visibility, as deployed",
            f"{_num(settings.get('router_timeout_real_s'), 1)} s / {_num(settings.get('main_queue_visibility_real_s'), 1)} s",
        ),
        ("concurrency slots", str(settings.get("max_concurrent_workflows", "?"))),
        ("execution-status polling", f"every {_num(settings.get('status_watcher_interval_s'))} s"),
    ]
    lines = ["## Parameters of this run", "", *_table(("", ""), rows, "ll"), ""]
    described = [
        (f"`{c['name']}`", c.get("description", ""), ", ".join(f"{k}={v}" for k, v in c.get("parameters", {}).items()))
        for c in configs
    ]
    lines += _table(("configuration", "what", "stack parameters"), described, "lll")
    return [*lines, ""]


def _headline(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = []
    for config in configs:
        runs = _runs(config)
        if not runs:
            continue
        ok = sum(1 for r in runs if r.get("ok"))
        rows.append(
            (
                f"`{config['name']}`",
                str(runs[0].get("files", "?")),
                spread([float(_jobs(r)) for r in runs], 0),
                str(len(runs)) + ("" if ok == len(runs) else f" ({len(runs) - ok} not ok)"),
                spread([r.get("wall_s") for r in runs]),
                spread([r.get("files_per_s") for r in runs]),
                spread([r.get("jobs_per_s") for r in runs]),
                spread([r.get("execution_median_s") for r in runs]),
            )
        )
    tails = [f"`{c['name']}` {i}" for c in configs for i, r in enumerate(_runs(c), 1) if _timeouts(r)]
    note = f" Runs with a Lambda timeout ({', '.join(tails)}) carry an extra visibility timeout in their wall time." if tails else ""
    return [
        "## Headline: whole-pipeline throughput",
        "",
        *_table(
            ("configuration", "files", "jobs", "repetitions", "wall s", "files/s", "jobs/s", "execution s (median)"),
            rows,
        ),
        "",
        "Median (min-max) over the runs. Wall time runs from the first upload until the sandbox is idle, so it "
        "includes uploading (sequential `put_object`, competing with the pipeline for the interpreter) and idle "
        "detection (see *last work* in the per-run table)." + note,
        "",
    ]


def _startup(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    runs = [r for c in configs for r in _runs(c)]
    if not runs:
        return []
    first, later = runs[0], runs[1:]
    rows = [
        ("first start in the process (includes one-off imports: the SAM translator, cfn parts of moto, the handlers)", _num(first.get("startup_s"))),
        ("later starts (deploy + runtime + poller + bus)", spread([r.get("startup_s") for r in later]) if later else "-"),
        ("warm-up: one file uploaded → idle", spread([r.get("warmup_s") for r in runs if r.get("warmup_s")])),
    ]
    return ["## Sandbox start-up", "", *_table(("", "seconds"), rows), ""]


def _per_run(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = []
    for config in configs:
        for i, run in enumerate(_runs(config), 1):
            functions = run.get("functions", {})
            errors = sum(sum(f.get("errors", {}).values()) for f in functions.values())
            timeouts = sum(f.get("timeouts", 0) for f in functions.values())
            wall = run.get("wall_s") or 0.0
            rows.append(
                (
                    f"`{config['name']}` {i}",
                    _num(run.get("startup_s")),
                    _num(run.get("upload_s")),
                    _num(run.get("wall_s")),
                    _num(run.get("work_s")),
                    f"{_jobs(run)} / {run.get('jobs_expected', '?')}",
                    _num(run.get("cpu_s")),
                    _num((run.get("cpu_s") or 0) / wall if wall else None),
                    _num(run.get("files_per_s")),
                    _num(run.get("jobs_per_s")),
                    f"{_num(run.get('execution_median_s'))} / {_num(run.get('execution_p90_s'))}",
                    _num(run.get("execution_occupancy"), 1),
                    str(functions.get("RouterFunction", {}).get("invocations", "-")),
                    f"{errors} / {timeouts}",
                    f"{_fmt_load(run.get('load_before'))} → {_fmt_load(run.get('load_after'))}",
                    "yes" if run.get("ok") else "**no**",
                )
            )
    return [
        "## Per run",
        "",
        *_table(
            (
                "run", "start-up s", "upload s", "wall s", "last work s", "jobs / expected", "CPU s", "CPU/wall", "files/s", "jobs/s",
                "execution s median / p90", "slots busy (mean)", "router batches", "Lambda errors / timeouts",
                "load 1-min before → after", "ok",
            ),
            rows,
        ),
        "",
        "*Last work*: the end of the last Lambda invocation or execution, from the first upload; the rest of the "
        "wall time is idle detection. *Jobs / expected*: completed runs against folders + root files; a file "
        "that lands after its folder's run was frozen opens the next run (by design), so a folder can count "
        "twice. *CPU*: process CPU seconds in the window (2 cores could give up to 2x "
        "wall). *Slots busy*: execution-seconds / seconds from the first execution start to the last stop.",
        "",
    ]


def _failures(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    rows: dict[tuple[str, str, str], int] = {}

    def add(row: tuple[str, str, str]) -> None:
        rows[row] = rows.get(row, 0) + 1

    for config in configs:
        for i, run in enumerate(_runs(config), 1):
            label = f"`{config['name']}` {i}"
            if not run.get("idle", True):
                add((label, "not idle before the timeout", f"runs by status: {dict(run.get('run_statuses', {}))}"))
            for sample in run.get("error_samples", []):
                add((label, f"{sample.get('function')} invocation failed", f"{sample.get('error_type')}: {_cell(sample.get('message', ''))}"))
            for failed in run.get("failed_executions", []):
                events = "; ".join(f"{e.get('type')} {e.get('error')}: {_cell(e.get('cause', ''))}" for e in failed.get("events", [])[:2])
                add((label, f"execution {failed.get('status')}", events or f"{failed.get('error')}: {_cell(failed.get('cause', ''))}"))
    if not rows:
        return []
    return [
        "## Failures seen in the timed runs",
        "",
        *_table(("run", "what", "detail", "times"), [(*row, str(n)) for row, n in rows.items()], "lllr"),
        "",
        "They are part of the measurement (the sandbox misbehaving under load), not hidden. Timeouts are "
        "reported in virtual seconds, as the function sees them (the template's Timeout; the real cut-off is that times the time scale). Error "
        "samples are capped at 8 per run.",
        "",
    ]


def _cell(text: Any, limit: int = 160) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")[:limit]


def env_key_errors(results: Mapping[str, Any]) -> list[str]:
    """Errors whose whole message is an environment variable's name in quotes: KeyErrors from os.environ."""
    found = []
    for config in results.get("configs", []):
        for run in _runs(config):
            texts = [s.get("message", "") for s in run.get("error_samples", [])]
            for failed in run.get("failed_executions", []):
                texts += [failed.get("cause", "")] + [e.get("cause", "") for e in failed.get("events", [])]
            found += [t for t in texts if _ENV_KEY.fullmatch(str(t).strip())]
    return sorted(set(found))


def _fmt_loads(load: Any) -> str:
    return " / ".join(_num(float(x)) for x in load) if load else "?"


def _fmt_load(load: Any) -> str:
    if not load:
        return "?"
    return _num(float(load[0]))


def _calls(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    names = [c["name"] for c in configs if _runs(c)]
    configs = [c for c in configs if _runs(c)]
    if not configs:
        return []
    lines = ["## AWS API calls per job", ""]
    handler = [calls_per_job(c, "handler") for c in configs]
    sfn = [calls_per_job(c, "stepfunctions") for c in configs]
    sandbox = [calls_per_job(c, "sandbox") for c in configs]
    driver = [calls_per_job(c, "driver") for c in configs]
    files_per_job = [_per_job(c, lambda r: float(r.get("files", 0))) for c in configs]

    def total(breakdown: Mapping[Any, float]) -> float:
        return sum(breakdown.values())

    headline_rows = []
    for name, h, s, m, d, fpj in zip(names, handler, sfn, sandbox, driver, files_per_job, strict=True):
        headline_rows.append(
            (
                f"`{name}`",
                _num(fpj, 2),
                f"**{_num(total(h), 1)}**",
                _num(total(h) / fpj, 1) if fpj else "-",
                _num(total(s), 1),
                _num(total(m), 1),
                _num(total(d), 1),
            )
        )
    lines += [
        "Headline: **calls made by handler code per job** — what a real AWS bill would see from the functions. "
        "Step Functions' own service-integration calls are billed too (as DynamoDB requests); the sandbox "
        "machinery's calls stand in for work AWS does itself and are not billed as API requests.",
        "",
        *_table(
            ("configuration", "files/job", "handler calls/job", "handler calls/file", "Step Functions tasks/job", "sandbox machinery/job", "benchmark driver/job"),
            headline_rows,
        ),
        "",
    ]

    def breakdown_table(parts: Sequence[Mapping[tuple[str, str, str], float]], first: str) -> list[str]:
        keys = sorted({k for p in parts for k in p}, key=lambda k: (-parts[0].get(k, 0.0), k))
        rows = [(k[1], k[2], k[0], *(_num(p.get(k), 2) if k in p else "-" for p in parts)) for k in keys]
        rows.append(("**total**", "", "", *(f"**{_num(total(p), 1)}**" for p in parts)))
        return _table(("service", "operation", first, *(f"`{n}`" for n in names)), rows, "lll" + "r" * len(names))

    lines += ["### Made by the handlers", "", *breakdown_table(handler, "function"), ""]
    lines += [
        "### Made by Step Functions (moto's ASL interpreter, through boto3)",
        "",
        "The `arn:aws:states:::dynamodb:updateItem` tasks and the Lambda tasks go through the interpreter's own "
        "boto3 clients, in-process through moto's stubber; none go over HTTP. IAM checks each of them as the "
        "state machine's call.",
        "",
        *breakdown_table(sfn, "made by"),
        "",
    ]
    lines += ["### Made by the sandbox machinery and the benchmark", "", *breakdown_table([{**m, **d} for m, d in zip(sandbox, driver, strict=True)], "component"), ""]

    lines += _billing(configs, names, handler, sfn)
    return lines


def _billing(
    configs: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    handler: Sequence[Mapping[tuple[str, str, str], float]],
    sfn: Sequence[Mapping[tuple[str, str, str], float]],
) -> list[str]:
    """A job in billing terms, and the cross-check of the call counters."""
    rows = [
        ("API calls by handler code", *(_num(sum(h.values()), 1) for h in handler)),
        ("DynamoDB calls by Step Functions tasks", *(_num(sum(v for k, v in s.items() if k[1] == "dynamodb"), 1) for s in sfn)),
        ("Lambda invocations (all functions)", *(_num(_per_job(c, lambda r: _function_total(r, "invocations")), 1) for c in configs)),
        ("Step Functions state transitions (sampled executions)", *(_num(_state_median(c, "(transitions)"), 0) for c in configs)),
        ("Lambda compute, sandbox ms (sum of durations)", *(_num(1000 * (_per_job(c, lambda r: _function_total(r, "total_s")) or 0), 0) for c in configs)),
    ]
    lines = ["### Per job, in billing terms", "", *_table(("", *(f"`{n}`" for n in names)), rows), ""]
    seen = [(sum(row["calls"] for row in r.get("calls", [])), r.get("calls_direct_total")) for c in configs for r in _runs(c)]
    hook_total = sum(a for a, _ in seen)
    direct_total = sum(b or 0 for _, b in seen)
    lines += [
        f"Cross-check: the `before-call` hook counted {hook_total:,} calls in the timed windows; the counter on "
        f"`BaseClient._make_api_call` counted {direct_total:,}"
        + (" — every call was seen." if hook_total == direct_total else " — **they differ**: some client escaped the hook.")
        + " moto never throttles, so calls equal requests (no SDK retries).",
        "",
    ]
    return lines


def _cpu(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    configs = [c for c in configs if _runs(c) and any(r.get("cpu_by_thread") for r in _runs(c))]
    if not configs:
        return []
    names = [c["name"] for c in configs]
    per_job: list[dict[str, float]] = []
    for c in configs:
        jobs = sum(_jobs(r) for r in _runs(c)) or 1
        kinds: dict[str, float] = defaultdict(float)
        for r in _runs(c):
            for kind, seconds in r.get("cpu_by_thread", {}).items():
                kinds[kind] += seconds
        per_job.append({k: v / jobs for k, v in kinds.items()})
    keys = sorted({k for p in per_job for k in p}, key=lambda k: -per_job[0].get(k, 0.0))
    rows = []
    for k in keys:
        cells = []
        for p in per_job:
            share = p.get(k, 0.0) / (sum(p.values()) or 1)
            cells.append(f"{p.get(k, 0.0) * 1000:,.0f} ({share:.0%})")
        rows.append((k, *cells))
    rows.append(("**total**", *(f"**{sum(p.values()) * 1000:,.0f}**" for p in per_job)))
    lines = [
        "## Where the time goes",
        "",
        "### CPU by thread, ms per job (share)",
        "",
        *_table(("thread", *(f"`{n}`" for n in names)), rows),
        "",
        "Step Functions interpreter threads are moto's: `_execution_logic` runs an execution (it first parses the "
        "definition), `_exec_and_notify` runs a Task state (a DynamoDB task's call through moto; a Lambda task's "
        "invocation, straight into the runtime, with its log and metric writes), `eval` runs a Map iteration. A handler thread's CPU "
        "includes moto's server-side work for the handler's own calls (in-process, the stub runs on the caller's "
        "thread).",
        "",
    ]
    states = sorted(
        {s for c in configs for r in _runs(c) for t in r.get("state_times", []) for s in t if not s.startswith("(")},
        key=lambda s: -(_state_median(configs[0], s) or 0.0),
    )
    top = {s for c in configs for r in _runs(c) for s in r.get("top_level_states", [])}
    rows = [("**execution (start → stop)**", *(_num(_state_median(c, "(execution)")) for c in configs))]
    rows += [
        ((s if s in top or not top else f"  ↳ {s} (Map item)"), *(_num(_state_median(c, s), 3) for c in configs))
        for s in states
        if any((_state_median(c, s) or 0) >= 0.005 for c in configs)
    ]
    lines += [
        "### Inside an execution: seconds per state (median of sampled executions)",
        "",
        *_table(("state", *(f"`{n}`" for n in names)), rows),
        "",
        "Map rows include their items; item rows are summed over a job's files. States under 5 ms are left out. "
        "The gap between the execution's duration and its states is the interpreter's own start-up (parsing the "
        "definition, before the first event) and hand-overs between threads.",
        "",
    ]
    return lines


def _raw(raw: Sequence[Mapping[str, Any]]) -> list[str]:
    if not raw:
        return []
    rows = [
        (
            r["operation"],
            f"{spread(r.get('samples', []), 1)} {r.get('unit', '')}",
            str(r.get("count", "")),
        )
        for r in raw
    ]
    return [
        "## Raw moto throughput (same run, in-process)",
        "",
        *_table(("operation", "this run: median (min-max)", "operations per sample"), rows),
        "",
        "Each sample runs on a fresh `mock_aws` with executing Step Functions, sequential calls from one thread.",
        "",
    ]


# --------------------------------------------------------------------------- figures for the analysis


def _cpu_figures(results: Mapping[str, Any], single: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    runs = [r for c in results.get("configs", []) for r in _runs(c)]
    ratios = [r["cpu_s"] / r["wall_s"] for r in runs if r.get("cpu_s") and r.get("wall_s")]
    rows = [("process CPU / wall time, per run", f"{_range(ratios, suffix='x')} ({len(ratios)} runs)")] if ratios else []
    if single is None:
        return rows
    kinds: dict[str, float] = defaultdict(float)
    for r in _runs(single):
        for kind, seconds in r.get("cpu_by_thread", {}).items():
            kinds[kind] += seconds
    total, cpu_job = sum(kinds.values()), _per_job(single, lambda r: r.get("cpu_s"))
    if total and cpu_job:
        interpreter = sum(v for k, v in kinds.items() if k.startswith("Step Functions")) / total
        handlers = sum(v for k, v in kinds.items() if k.startswith("handler")) / total
        rows += [
            (f"`{single['name']}`: CPU per job (on interpreter threads / handler threads)", f"{cpu_job * 1000:,.0f} ms ({interpreter:.0%} / {handlers:.0%})"),
            (f"`{single['name']}`: jobs/s one core of CPU allows / measured", f"{1 / cpu_job:.1f} / {_num(_median(r.get('jobs_per_s') for r in _steady(single)))}"),
        ]
    return rows


def _interpreter_figures(results: Mapping[str, Any], single: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    if single is None:
        return []
    raw = {r["key"]: r for r in results.get("raw_moto", [])}
    parse = _median(r.get("asl_parse_ms") for r in _runs(single))
    states = len(_runs(single)[0].get("top_level_states", [])) if _runs(single) else 0
    task_calls = sum(calls_per_job(single, "stepfunctions").values())
    creation = raw.get("client_creation", {}).get("median")
    rows = [("moto's parse of the definition (top-level states)", f"{parse:.0f} ms ({states or '?'})")] if parse else []
    if task_calls:
        rows.append(("Task calls per job by the interpreter", f"{task_calls:.0f}"))
    if creation:
        rows.append(("a new boto3 client (raw moto)", f"{creation:.1f} ms"))
    transitions = _state_median(single, "(transitions)")
    if transitions:
        rows.append((f"`{single['name']}`: state transitions per execution", _num(transitions, 0)))
    return rows


def _router_figures(configs: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    runs = [r for c in configs for r in _runs(c)]
    waits = [w for c in configs if (w := calls_per_job(c, "handler").get(("RouterFunction", "sqs", "SendMessage"))) is not None]
    batch_ms = [m for r in runs if (m := r.get("functions", {}).get("RouterFunction", {}).get("median_ms")) is not None]
    max_ms = [m for r in runs if (m := r.get("functions", {}).get("RouterFunction", {}).get("max_ms"))]
    timeouts = sum(f.get("timeouts", 0) for r in runs for f in r.get("functions", {}).values())
    rows = [("router re-sends (capacity waits) per job", _range(waits))] if waits else []
    if batch_ms:
        slowest = f", slowest {max(max_ms):,.0f}" if max_ms else ""
        rows.append(("router batch, median per run", f"{_range(batch_ms, ',.0f')} ms{slowest}"))
    rows.append(("Lambda timeouts in the timed windows", str(timeouts)))
    return rows


def _failure_figures(results: Mapping[str, Any]) -> list[tuple[str, str]]:
    runs = [r for c in results.get("configs", []) for r in _runs(c)]
    sampled = sum(len(r.get("state_times", [])) for r in runs)
    retried = sum(int(t.get("(retried failures)", 0)) for r in runs for t in r.get("state_times", []))
    retried += sum(int(f.get("retried_failures", 0)) for r in runs for f in r.get("failed_executions", []))
    failed = sum(int(t.get("(failed events)", 0)) for r in runs for t in r.get("state_times", []))
    failed += sum(len(f.get("events", [])) for r in runs for f in r.get("failed_executions", []))
    errors = sum(sum(f.get("errors", {}).values()) for r in runs for f in r.get("functions", {}).values())
    rows = [
        ("failed Lambda invocations in the timed windows", str(errors)),
        (f"failed events in {sampled} sampled and the failed executions (with an error a Retry lists)", f"{failed} ({retried})"),
    ]
    keys = env_key_errors(results)
    if keys:
        rows.append(("errors that are an environment variable's name (os.environ raced)", ", ".join(keys)))
    return rows


def _call_figures(configs: Sequence[Mapping[str, Any]], single: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    handler = [sum(calls_per_job(c, "handler").values()) for c in configs]
    machinery = [sum(calls_per_job(c, "sandbox").values()) for c in configs]
    rows = [("handler calls per job, over the configurations", _range(handler, ".1f"))] if handler else []
    if machinery:
        rows.append(("the sandbox's own calls per job", _range(machinery, ".1f")))
    if single is not None and handler:
        top = sorted(calls_per_job(single, "handler").items(), key=lambda kv: -kv[1])[:3]
        rows.append((f"`{single['name']}`: most calls per job", ", ".join(f"{k[0]} {k[1]} {k[2]} {v:.1f}" for k, v in top)))
    return rows


def derived(results: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(figure, value) for every figure the hand-written analysis reads; a figure without data is left out. Pure."""
    configs = [c for c in results.get("configs", []) if _runs(c)]
    by_name = {c["name"]: c for c in configs}
    single = by_name.get("single") or (configs[0] if configs else None)
    rows = _cpu_figures(results, single) + _interpreter_figures(results, single)
    folders = by_name.get("folders")
    if folders is not None and single is not None and folders is not single:
        files_s = [_median(r.get("files_per_s") for r in _steady(c)) for c in (folders, single)]
        if all(files_s):
            rows.append(("files/s, `folders` / `single` (runs without a Lambda timeout)", " / ".join(f"{x:.1f}" for x in files_s if x)))
    if configs:
        rows += _router_figures(configs) + _failure_figures(results) + _call_figures(configs, single)
    return rows


def _derived(results: Mapping[str, Any]) -> list[str]:
    rows = derived(results)
    if not rows:
        return []
    return ["## Figures the analysis reads", "", *_table(("figure", "this run"), rows, "lr"), ""]


# --------------------------------------------------------------------------- entry point


def render(results: Mapping[str, Any]) -> str:
    """The body of the `e2e` section: its tables, nothing written by hand."""
    meta = results.get("meta", {})
    configs = results.get("configs", [])
    lines: list[str] = []
    lines += _stamp(meta)
    lines += _machine(meta)
    lines += _method(results)
    lines += _headline(configs)
    lines += _startup(configs)
    lines += _per_run(configs)
    lines += _calls(configs)
    lines += _cpu(configs)
    lines += _raw(results.get("raw_moto", []))
    lines += _failures(configs)
    lines += _derived(results)
    return "\n".join(lines).rstrip() + "\n"
