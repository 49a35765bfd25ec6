"""The `pipeops` command line: thin wiring over the pipeline, monitors and sandbox."""

from __future__ import annotations

import json
from importlib.metadata import version

import typer

app = typer.Typer(help="Observability and reliability for serverless file-processing pipelines.", no_args_is_help=True)


@app.command("version")
def show_version(as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts.")) -> None:
    """Print the installed pipeops version."""
    installed = version("pipeops")
    typer.echo(json.dumps({"version": installed}) if as_json else installed)


@app.command()
def demo() -> None:
    """Run the reference pipeline end to end on the embedded sandbox."""
    typer.echo("The demo arrives with the embedded sandbox (issue 3): nothing to run yet.")


@app.command("metrics")
def metrics_catalog(as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts.")) -> None:
    """List the metric catalog: every metric the pipeline emits, its unit and meaning."""
    from pipeline.telemetry.catalog import CATALOG, NAMESPACE

    rows = [
        {"name": spec.name.value, "unit": spec.unit.value, "dimensions": list(spec.dimensions), "description": spec.description}
        for spec in CATALOG.values()
    ]
    if as_json:
        typer.echo(json.dumps({"namespace": NAMESPACE, "metrics": rows}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Metrics in namespace {NAMESPACE}")
    for column in ("name", "unit", "description"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["name"], row["unit"], row["description"])
    Console().print(table)


if __name__ == "__main__":
    app()
