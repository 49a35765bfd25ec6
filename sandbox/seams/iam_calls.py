"""BEHAVIOUR seam: every AWS call of a handler or the state machine goes past the IAM check
(`sandbox.iam_enforcement`).

What moto lacks: it checks no IAM; a handler whose role lacks an action works in moto and fails
with AccessDenied on AWS. And a thread a handler starts begins with an empty context, where AWS
gives it the function's credentials.

What it adds: `botocore.client.BaseClient._make_api_call` asks the last attached enforcement to
name the caller and authorize the call before it is sent (a call of the sandbox's own clients, or
with no principal, passes); `threading.Thread.start` and `ThreadPoolExecutor.submit` called in a
handler run the new thread or task in a copy of the handler's context (moto's own threads aside).
Not moto's privates but botocore's and the standard library's, patched the same way.
"""

from __future__ import annotations

import contextvars
import functools
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import FrameType
from typing import Any, Protocol

from botocore.client import BaseClient
from botocore.exceptions import ClientError

from sandbox.clients import INTERNAL_USER_AGENT
from sandbox.runtime import running_function
from sandbox.seams.patching import Patch, RoutedSeam

KIND = "BEHAVIOUR"


class Enforcer(Protocol):
    def caller(self, frame: FrameType | None) -> Any: ...

    def authorize(self, client: Any, caller: Any, operation_name: str, api_params: Any) -> Any: ...

    def after_error(self, client: Any, caller: Any, call: Any, exc: ClientError) -> None: ...


def _is_internal(client: Any) -> bool:
    try:
        return INTERNAL_USER_AGENT in (client.meta.config.user_agent_extra or "")
    except AttributeError:
        return False


def _checked(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _make_api_call(self: Any, operation_name: str, api_params: Any) -> Any:
        enforcement = SEAM.current()
        if enforcement is None or _is_internal(self):
            return original(self, operation_name, api_params)
        caller = enforcement.caller(sys._getframe(1))
        if caller is None:
            return original(self, operation_name, api_params)
        call = enforcement.authorize(self, caller, operation_name, api_params)
        try:
            return original(self, operation_name, api_params)
        except ClientError as exc:
            enforcement.after_error(self, caller, call, exc)
            raise

    return _make_api_call


def _inheriting_start(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def start(self: threading.Thread) -> None:
        """A thread a handler starts runs in a copy of the handler's context."""
        target = getattr(self, "_target", None)
        if running_function() is None or str(getattr(target, "__module__", "")).startswith("moto."):
            return original(self)
        context = contextvars.copy_context()
        run = self.run

        def run_in_context() -> None:
            context.run(run)

        self.run = run_in_context  # type: ignore[method-assign]
        return original(self)

    return start


def _inheriting_submit(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def submit(self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """A task runs as whoever submitted it (pool threads are reused)."""
        if running_function() is None:
            return original(self, fn, *args, **kwargs)
        return original(self, contextvars.copy_context().run, fn, *args, **kwargs)

    return submit


def _patches() -> list[Patch]:
    return [
        Patch(BaseClient, "_make_api_call", _checked),
        Patch(threading.Thread, "start", _inheriting_start),
        Patch(ThreadPoolExecutor, "submit", _inheriting_submit),
    ]


SEAM: RoutedSeam[Enforcer] = RoutedSeam(_patches)
