"""What every command shares: the connection options, the way to fail, and the connection itself."""

from __future__ import annotations

from typing import Annotated

import typer

from pipeops import render
from pipeops.render import ErrorCode
from stack.resources import (
    BadConnectionError,
    Connection,
    NoCredentialsError,
    SidecarStack,
    SidecarStackError,
    StackNotFoundError,
    StackResources,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print versioned JSON for scripts.")]
EndpointOption = Annotated[
    str | None, typer.Option("--endpoint-url", help="AWS endpoint, e.g. the sandbox's (default: AWS_ENDPOINT_URL).")
]
StackOption = Annotated[str | None, typer.Option("--stack-name", help="The pipeops stack (default: pipeops).")]
RegionOption = Annotated[
    str | None,
    typer.Option(
        "--region",
        help="AWS region (default, as the aws CLI: AWS_REGION, AWS_DEFAULT_REGION, the profile's region, us-east-1).",
    ),
]
ProfileOption = Annotated[
    str | None, typer.Option("--profile", help="Named AWS profile for credentials and region (default: AWS_PROFILE).")
]

CONNECTION_ERRORS = (BadConnectionError, NoCredentialsError, StackNotFoundError)


def error_code(exc: Exception) -> ErrorCode:
    """The envelope code of a connection error."""
    if isinstance(exc, BadConnectionError):
        return ErrorCode.BAD_CONNECTION
    if isinstance(exc, SidecarStackError):  # the stack is there; the command does not apply to it
        return ErrorCode.BAD_INPUT
    return ErrorCode.NO_CREDENTIALS if isinstance(exc, NoCredentialsError) else ErrorCode.STACK_NOT_FOUND


def fail(message: str, code: ErrorCode = ErrorCode.BAD_INPUT) -> typer.Exit:
    """Say what to fix (stderr; with --json also the envelope on stdout); raise what this returns."""
    render.emit_error(message, code)
    return typer.Exit(render.ERROR_EXIT)


def connect(
    stack_name: str | None, endpoint_url: str | None, region: str | None, profile: str | None = None
) -> tuple[Connection, StackResources]:
    """The connection and the stack's resources, or exit 2 saying what to fix."""
    try:
        connection = Connection.resolve(stack_name, endpoint_url, region, profile)
        return connection, connection.resources()
    except CONNECTION_ERRORS as exc:
        raise fail(str(exc), error_code(exc)) from None


def connect_any(
    stack_name: str | None, endpoint_url: str | None, region: str | None, profile: str | None = None
) -> tuple[Connection, StackResources | SidecarStack]:
    """As `connect`, for the commands that also serve a sidecar stack (`pipeops sidecar build`)."""
    try:
        connection = Connection.resolve(stack_name, endpoint_url, region, profile)
        return connection, connection.any_resources()
    except CONNECTION_ERRORS as exc:
        raise fail(str(exc), error_code(exc)) from None
