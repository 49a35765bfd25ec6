"""`pipeops upload`: files into the pipeline's input bucket."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeops import render
from pipeops.commands.common import (
    EndpointOption,
    JsonOption,
    ProfileOption,
    RegionOption,
    StackOption,
    connect,
    fail,
)


def upload(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to upload (folders recursively).")],
    prefix: Annotated[str, typer.Option(help="Key prefix, e.g. 'claims/'.")] = "",
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Upload files to the pipeline's input bucket (keys relative to each folder given)."""
    from pipeops.upload import upload_paths

    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        raise fail(f"{', '.join(missing)} does not exist: pass files or folders that do")
    connection, resources = connect(stack_name, endpoint_url, region, profile)
    uploaded = upload_paths(connection.client("s3"), resources.InputBucketName, paths, prefix)
    if as_json:
        render.emit_json("upload", uploaded.to_dict())
    else:
        render.console.print(f"uploaded {len(uploaded.keys)} file(s) to {uploaded.bucket}")
