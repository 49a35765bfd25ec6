"""`pipeops demo --sidecar` runs as is: the example pipeline stalls at its max, the sidecar pages,
its scheduled reconciler repairs the counter (audited), the stalled documents run, alarms back to OK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_sidecar_demo_plays_the_stall_the_page_and_the_repair() -> None:
    env = {**os.environ, "TERM": "dumb", "NO_COLOR": "1"}
    env.pop("AWS_ENDPOINT_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "pipeops.cli", "demo", "--sidecar", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    envelope = json.loads(done.stdout)
    assert envelope["kind"] == "sidecar_demo"
    seen = envelope["data"]
    assert seen["violations"] == []
    assert (seen["max_slots"], seen["stalled_counter"], seen["stalled_succeeded"]) == (3, 3, 0)
    assert seen["paged_after"] is not None
    assert "SlotsFullIdle" in {finding["name"] for finding in seen["status_when_paged"]["findings"]}
    repair = seen["repair"]
    assert repair["action"] == "set_count" and repair["target"] == "counter-pipeline-concurrency/workflow_counter"
    assert "ReconcilerFunction" in repair["by"]  # the scheduled sidecar reconciler, not a person
    assert (seen["succeeded"], seen["final_counter"]) == (5, 0)
    assert seen["most_running_at_once"] <= 3
    assert seen["recovered_after"] is not None and seen["not_ok_after"] == []
