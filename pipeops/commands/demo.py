"""`pipeops demo`: the reference pipeline and an incident on an in-process sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeops import render
from pipeops.commands.common import JsonOption, fail


def demo(
    as_json: JsonOption = False,
    samples: Annotated[Path, typer.Option(help="Folder to upload (default: the bundled sample dataset).")] = Path(),
    sidecar: Annotated[
        bool, typer.Option("--sidecar", help="Instead: the sidecar beside a pipeline we did not build (examples/counter-pipeline).")
    ] = False,
) -> None:
    """Run the reference pipeline end to end on an in-process sandbox, then an incident on it.

    Act 1 uploads the sample dataset in blackout and in synthetic mode, shows progress until every
    file's run is terminal, prints each job and `pipeops status`, and checks the invariants.
    Act 2 leaks a slot and poisons the main queue by hand, then shows the alarms that fire, the
    reconcile that repairs the leak, the DLQ's runbook (a dry run, then --apply), and the alarms back to OK. Exits 1 if a
    file is lost, an invariant fails, or the incident does not play out.

    With --sidecar: the example counter pipeline and the sidecar built for it; the processor dies
    after its increment until the counter sits at the max, the sidecar pages, its reconciler repairs
    it, the stalled documents run. Exits 1 if any of that does not happen.
    """
    if sidecar:
        from pipeops.sidecar.demo import run_sidecar_demo

        if run_sidecar_demo(render.console, as_json=as_json):
            raise typer.Exit(1)
        return
    from pipeops.demo import SAMPLES_DIR, run_demo, sample_files

    files = sample_files(samples if samples != Path() else SAMPLES_DIR)
    if not files:
        raise fail(f"no files under {samples}: pass --samples a folder that holds some")
    if run_demo(files, render.console, as_json=as_json):
        raise typer.Exit(1)
