"""The sandbox's Lambda runtime: real Python handlers running inside moto (docs/ARCHITECTURE.md#sandbox).

Without Docker, moto cannot run handler code. Every route into a function -- the Invoke API
(including the calls Step Functions' ASL interpreter makes for Lambda tasks), async invokes, S3 /
SNS / DynamoDB / Kinesis / Logs deliveries and moto's own SQS event source mapping -- ends in
`moto.awslambda.models.LambdaFunction.invoke`, which calls `LambdaFunction._invoke_lambda(event)`:
the seam (`sandbox.seams.lambda_invoke`) hands that call to the installed `LambdaRuntime`, which
imports the function's `Handler` and runs it.

One invocation:
1. Resolve the handler (`pkg.module.func`) -- imported once, under a global lock, with the
   function's environment applied; module state then persists like a warm container. Import
   failures are reported as the AWS runtime does (`Runtime.ImportModuleError`,
   `Runtime.HandlerNotFound`, `Runtime.UserCodeSyntaxError`, or the exception's class name).
2. Run the handler on a fresh daemon worker thread with a realistic context object, stdout/stderr
   of that thread routed to the invocation's capture (`sandbox.capture`).
3. Wait at most `Timeout x TimeScale.factor` real seconds. On overrun the invocation fails with
   `{"errorType": "Sandbox.Timedout", "errorMessage": "Task timed out after N.NN seconds"}`, which
   Step Functions' Retry/Catch see under the error name `Sandbox.Timedout`, as in AWS. Python cannot
   kill a thread: the abandoned worker keeps running to completion in the background (daemon, so it
   never blocks interpreter exit); its later output is dropped, never mixed into another capture.
4. The result is JSON-serialised (`null` for None; `Runtime.MarshalError` if it cannot be); an
   exception becomes `{"errorMessage", "errorType": <bare class name>, "requestId", "stackTrace"}`.
5. START / captured lines / [ERROR] / END / REPORT go to CloudWatch Logs `/aws/lambda/<name>`
   (stream `YYYY/MM/DD/[$LATEST]<hex>`, one per concurrently busy "execution environment"), and
   every EMF line becomes CloudWatch metrics (`sandbox.emf`), in the function's account and
   region. Both are written straight into moto's Logs and CloudWatch backends, as Lambda's own
   log delivery is no PutLogEvents call: the runtime always runs in the process hosting moto (it
   patches moto's Lambda), in-process `mock_aws` and `ThreadedMotoServer` alike, and a boto3
   round trip per invocation cost more CPU than many a handler's own calls. Written before the
   invocation returns, so its logs and metrics are readable as soon as its caller has the result.

Environment (the honest limitation): all handlers share one interpreter, and `os.environ` is
global. The runtime applies a function's variables (its `Environment.Variables` plus
AWS_LAMBDA_FUNCTION_NAME, AWS_LAMBDA_FUNCTION_MEMORY_SIZE, AWS_LAMBDA_FUNCTION_VERSION,
AWS_REGION, AWS_DEFAULT_REGION, AWS_LAMBDA_LOG_GROUP_NAME, AWS_LAMBDA_LOG_STREAM_NAME, _HANDLER,
AWS_EXECUTION_ENV, AWS_LAMBDA_LOG_FORMAT and AWS_LAMBDA_LOG_LEVEL for the JSON log format
(`sandbox.lambda_logging`, which also drops the lines Lambda's log-level filter would),
OTEL_EXPORTER_OTLP_ENDPOINT (`sandbox.otlp_receiver`) for a function exporting spans over OTLP,
and AWS_ENDPOINT_URL when the runtime has an endpoint) under one global lock,
and imports handler modules under that same lock -- so **module-level reads of os.environ are
always correct**. While several invocations run at once (a Step Functions Map runs items on
threads) the process environment holds the variables of whichever invocation started last; a
handler that reads os.environ *during* an invocation can then see another function's values.
Handlers must therefore read configuration at import time and take the function name from the
context. When no invocation is in flight, every variable the runtime touched is restored.
Two functions sharing one handler module also share that module's state (one import), and a
module something else imported first (a test, another handler) is not re-imported under the
function's environment. Import time is not bounded by the Timeout (AWS has a separate init limit);
in server mode a module that invokes another Lambda *at import* would wait on the import lock.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import decimal
import importlib
import json
import logging
import math
import os
import resource
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sandbox import emf, lambda_logging, otlp_receiver
from sandbox.capture import InvocationCapture, StdioRouting, capturing
from sandbox.clock import TimeScale
from sandbox.seams import lambda_invoke

LOG = logging.getLogger("sandbox.runtime")

TIMEOUT_ERROR_TYPE = "Sandbox.Timedout"
# Variables the runtime sets per invocation (its log stream): not part of a function's configuration.
_PER_INVOCATION_VARIABLES = frozenset({"AWS_LAMBDA_LOG_STREAM_NAME"})
LOG_TAIL_BYTES = 4096  # the Invoke API's LogResult carries the last 4 KB, as in AWS

# Held while mutating os.environ and while importing handler modules (re-entrant: a handler's
# module may itself invoke another function synchronously while it is being imported).
_ENV_LOCK = threading.RLock()
_INSTALL_LOCK = threading.Lock()


# --------------------------------------------------------------------------- public value types


@dataclass(frozen=True)
class InvocationRecord:
    """What one invocation did (for tests, the demo and the sandbox's own pollers)."""

    function_name: str
    request_id: str
    duration_ms: float
    errored: bool
    error_type: str | None
    log_lines: tuple[str, ...]
    payload: str = ""
    timed_out: bool = False
    log_stream_name: str = ""
    started_at: float = 0.0  # epoch seconds
    ended_at: float = 0.0  # epoch seconds: when the invocation ended (for a timeout: the cut-off)


class FunctionFaults(Protocol):
    """Where the runtime asks whether an invocation is to fail (`sandbox.faults.FaultBoard`):
    None, or a `FunctionFault` (effect error / timeout / delay)."""

    def function_fault(self, function_name: str) -> Any: ...


class InvocationListener(Protocol):
    """Told of every invocation's start and end (`LambdaRuntime.add_listener`), e.g. to publish
    the AWS/Lambda metrics. Called on the invoking thread: it must be quick and must not raise
    (an exception is logged and ignored; it never fails the invocation).
    `record` is None only if the runner itself failed before producing one."""

    def invocation_started(self, function_name: str, request_id: str) -> None: ...

    def invocation_finished(
        self, function_name: str, request_id: str, record: InvocationRecord | None
    ) -> None: ...


@dataclass(frozen=True)
class RunningFunction:
    """The function invocation a handler thread runs: who its AWS calls are made as.

    Set in the handler's worker thread (a context variable), so the sandbox's IAM check
    (sandbox.iam_enforcement) can tell a handler's call from the sandbox's own. Python copies no
    context into a new thread: while IAM is enforced, the threads and ThreadPoolExecutor tasks a
    handler starts are given a copy of its context there (on AWS they share its credentials).
    """

    function_name: str
    function_arn: str
    role_arn: str
    request_id: str


_RUNNING: contextvars.ContextVar[RunningFunction | None] = contextvars.ContextVar(
    "sandbox_running_function", default=None
)


def running_function() -> RunningFunction | None:
    """The invocation this thread runs a handler for, or None outside a handler."""
    return _RUNNING.get()


@dataclass(frozen=True)
class InvokeResult:
    """The answer of `LambdaRuntime.invoke_direct`."""

    payload: Any  # the decoded JSON response (or error document)
    errored: bool
    error_type: str | None
    request_id: str
    raw: str = field(repr=False, default="")


class LambdaContext:
    """The context object the AWS Python runtime passes to a handler."""

    def __init__(
        self,
        *,
        function_name: str,
        function_version: str,
        invoked_function_arn: str,
        memory_limit_in_mb: int,
        aws_request_id: str,
        log_group_name: str,
        log_stream_name: str,
        deadline_monotonic: float,
        real_timeout: float,
        timeout_seconds: float,
    ) -> None:
        self.function_name = function_name
        self.function_version = function_version
        self.invoked_function_arn = invoked_function_arn
        self.memory_limit_in_mb = memory_limit_in_mb
        self.aws_request_id = aws_request_id
        self.log_group_name = log_group_name
        self.log_stream_name = log_stream_name
        self.identity = None
        self.client_context = None
        self.tenant_id = None
        self._deadline = deadline_monotonic
        self._real_timeout = real_timeout
        self._timeout_seconds = timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        """Virtual milliseconds left: starts at Timeout*1000 and reaches 0 at the real cut-off."""
        real_left = max(0.0, self._deadline - time.monotonic())
        share_left = real_left / self._real_timeout if self._real_timeout > 0 else 0.0
        return int(self._timeout_seconds * share_left * 1000)

    def __repr__(self) -> str:
        return f"LambdaContext(function_name={self.function_name!r}, aws_request_id={self.aws_request_id!r})"


# --------------------------------------------------------------------------- environment


class _EnvOverlay:
    """Applies a function's variables to os.environ; restores the originals on uninstall.

    Variables are only ever set while the runtime is installed, never deleted: any thread that
    copies os.environ (botocore building a client does) would raise KeyError if a key vanished
    under its iteration. A variable of another function may therefore remain visible; the
    pipeline's functions share their values. Every method must be called with `_ENV_LOCK` held.
    """

    def __init__(self) -> None:
        self._baseline: dict[str, str | None] = {}
        self._in_flight = 0

    def apply(self, env: dict[str, str]) -> None:
        for key, value in env.items():
            if key not in self._baseline:
                self._baseline[key] = os.environ.get(key)
            os.environ[key] = value

    def enter(self, env: dict[str, str]) -> None:
        self.apply(env)
        self._in_flight += 1

    def exit(self) -> None:
        self._in_flight = max(0, self._in_flight - 1)

    def restore(self) -> None:
        for key in list(self._baseline):
            self._reset(key)
        self._baseline.clear()

    def _reset(self, key: str) -> None:
        original = self._baseline.get(key)
        if original is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = original


# --------------------------------------------------------------------------- handler resolution


class _InitError(Exception):
    """A failure to load the handler, reported with the AWS runtime's error type."""

    def __init__(self, error_type: str, message: str, stack: list[str] | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.stack = stack or []


def _stack_of(exc: BaseException, skip: int = 0) -> list[str]:
    frames = traceback.extract_tb(exc.__traceback__)[skip:]
    return traceback.format_list(frames)


def _import_handler(handler: str) -> Callable[..., Any]:
    try:
        modname, fname = handler.rsplit(".", 1)
    except ValueError as exc:
        raise _InitError("Runtime.MalformedHandlerName", f"Bad handler '{handler}': {exc}") from None
    if modname.split(".")[0] in sys.builtin_module_names:
        raise _InitError(
            "Runtime.BuiltInModuleConflict",
            f"Cannot use built-in module {modname} as a handler module",
        )
    try:
        module = importlib.import_module(modname.replace("/", "."))
    except ImportError as exc:
        raise _InitError("Runtime.ImportModuleError", f"Unable to import module '{modname}': {exc}") from None
    except SyntaxError as exc:
        trace = [f'  File "{exc.filename}" Line {exc.lineno}\n    {exc.text}']
        raise _InitError(
            "Runtime.UserCodeSyntaxError", f"Syntax error in module '{modname}': {exc}", trace
        ) from None
    except Exception as exc:  # module-level code raised: AWS reports the class name
        raise _InitError(type(exc).__name__, str(exc), _stack_of(exc, skip=1)) from None
    func = getattr(module, fname, None)
    if func is None or not callable(func):
        raise _InitError("Runtime.HandlerNotFound", f"Handler '{fname}' missing on module '{modname}'")
    return func


def _json_default(obj: Any) -> Any:
    if isinstance(obj, decimal.Decimal):
        return int(obj) if obj == obj.to_integral_value() else float(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


# --------------------------------------------------------------------------- the runtime


@dataclass
class _Outcome:
    result: Any = None
    exc: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class LambdaRuntime:
    """Runs real Python handlers for moto's Lambda functions. Use as a context manager.

    `region`: the default region of a function; `endpoint_url`: the served moto's endpoint, given
    to handlers as AWS_ENDPOINT_URL (None: in-process `mock_aws`). `time_scale` shortens every function
    Timeout, down to `min_real_timeout` real seconds at least (see `real_timeout`).
    `extra_sys_path`: folders prepended to sys.path while installed (handler code roots).
    """

    def __init__(
        self,
        region: str = "us-east-1",
        endpoint_url: str | None = None,
        time_scale: TimeScale | None = None,
        extra_sys_path: Iterable[str | os.PathLike[str]] = (),
        *,
        publish_logs: bool = True,
        publish_metrics: bool = True,
        min_real_timeout: float = 0.0,
    ) -> None:
        self.region = region
        self.min_real_timeout = min_real_timeout
        self.endpoint_url = endpoint_url
        self.time_scale = time_scale or TimeScale(1.0)
        self.extra_sys_path = tuple(os.fspath(p) for p in extra_sys_path)
        self.publish_logs = publish_logs
        self.publish_metrics = publish_metrics

        self._installed = False
        self._stdio = StdioRouting()
        self._inserted_paths: list[str] = []
        self._env = _EnvOverlay()
        self._handlers: dict[str, Callable[..., Any]] = {}
        self._streams_lock = threading.Lock()
        self._free_streams: dict[tuple[str, str, str], list[str]] = {}
        self._records: list[InvocationRecord] = []
        self._records_cond = threading.Condition()
        self._listeners: tuple[InvocationListener, ...] = ()
        self._listeners_lock = threading.Lock()
        self._configurations: dict[str, tuple[Any, ...]] = {}  # function name -> configuration last run
        self._configurations_lock = threading.Lock()
        self._fresh_environment_hooks: tuple[Callable[[str], None], ...] = ()
        self.faults: FunctionFaults | None = None  # set by the sandbox: injected invocation faults

    def real_timeout(self, timeout_seconds: float) -> float:
        """Real seconds a function with this Timeout may run before it is cut off.

        The time scale shortens it, but never below `min_real_timeout` (nor above the Timeout
        itself): the scale is for waits, and a handler on a busy machine must not time out just
        because its 30 s became 1.5 s. A test that wants the cut-off sets a small Timeout.
        """
        return max(self.time_scale.scale(timeout_seconds), min(timeout_seconds, self.min_real_timeout))

    # ---------------------------------------------------------------- install / uninstall

    def install(self) -> LambdaRuntime:
        with _INSTALL_LOCK:
            if self._installed:
                return self
            if lambda_invoke.SEAM.attached():
                raise RuntimeError("another LambdaRuntime is already installed in this process")
            # The routing proxy must be in place before any handler module is imported.
            self._stdio.install()
            for path in reversed(self.extra_sys_path):
                if path not in sys.path:
                    sys.path.insert(0, path)
                    self._inserted_paths.append(path)
            importlib.invalidate_caches()
            lambda_invoke.SEAM.attach(self)
            self._installed = True
        return self

    def uninstall(self) -> None:
        with _INSTALL_LOCK:
            if not self._installed:
                return
            lambda_invoke.SEAM.detach(self)
            for path in self._inserted_paths:
                with contextlib.suppress(ValueError):
                    sys.path.remove(path)
            self._inserted_paths.clear()
            self._stdio.remove()
            with _ENV_LOCK:
                self._env.restore()
            self._installed = False

    def __enter__(self) -> LambdaRuntime:
        return self.install()

    def __exit__(self, *exc_info: object) -> None:
        self.uninstall()

    @property
    def installed(self) -> bool:
        return self._installed

    # ---------------------------------------------------------------- listeners

    def add_listener(self, listener: InvocationListener) -> None:
        """Tell `listener` of every invocation from now on (see `InvocationListener`)."""
        with self._listeners_lock:
            if listener not in self._listeners:
                self._listeners = (*self._listeners, listener)

    def remove_listener(self, listener: InvocationListener) -> None:
        with self._listeners_lock:
            self._listeners = tuple(x for x in self._listeners if x is not listener)

    def on_fresh_environments(self, hook: Callable[[str], None]) -> None:
        """Call `hook(function_name)` when a function's configuration changed since its last
        invocation (UpdateFunctionConfiguration, new code): AWS then runs it in new execution
        environments, which start without the module state of the old ones. Every function shares
        this interpreter, so whoever keeps state per function drops that function's here."""
        with self._listeners_lock:
            self._fresh_environment_hooks = (*self._fresh_environment_hooks, hook)

    def _check_configuration(self, fn: Any, env: Mapping[str, str]) -> None:
        """Tell the fresh-environment hooks when `fn` runs with another configuration than before."""
        name = str(fn.function_name)
        configuration = (
            str(fn.handler),
            tuple(sorted((k, v) for k, v in env.items() if k not in _PER_INVOCATION_VARIABLES)),
            fn.memory_size,
            fn.timeout,
            str(getattr(fn, "code_sha_256", "")),
        )
        with self._configurations_lock:
            previous = self._configurations.get(name)
            self._configurations[name] = configuration
        if previous is None or previous == configuration:
            return
        for hook in self._fresh_environment_hooks:
            try:
                hook(name)
            except Exception:
                LOG.warning("fresh-environment hook %r failed for %s", hook, name, exc_info=True)

    def _notify(self, method: str, *args: Any) -> None:
        for listener in self._listeners:  # a snapshot: the tuple is replaced, never mutated
            try:
                getattr(listener, method)(*args)
            except Exception:
                LOG.warning("invocation listener %r failed in %s", listener, method, exc_info=True)

    # ---------------------------------------------------------------- records

    @property
    def invocations(self) -> list[InvocationRecord]:
        """A snapshot of every invocation so far, in completion order."""
        with self._records_cond:
            return list(self._records)

    def clear_invocations(self) -> None:
        with self._records_cond:
            self._records.clear()

    def wait_for_invocations(self, count: int, timeout: float = 10.0) -> list[InvocationRecord]:
        """Block until at least `count` invocations have completed (or `timeout` passes)."""
        with self._records_cond:
            self._records_cond.wait_for(lambda: len(self._records) >= count, timeout=timeout)
            return list(self._records)

    # ---------------------------------------------------------------- invoking

    def invoke_direct(
        self,
        function_name: str,
        event: Any = None,
        *,
        qualifier: str | None = None,
        region: str | None = None,
        account_id: str | None = None,
    ) -> InvokeResult:
        """Invoke a function synchronously through the same runner the patched hook uses.

        For the sandbox's own pollers (SQS event sources, schedules). `function_name` may be a
        name or an ARN (whose region/account then win). `event` is a JSON-compatible object.
        """
        from moto.awslambda.utils import get_backend
        from moto.core import DEFAULT_ACCOUNT_ID

        if function_name.startswith("arn:"):
            parts = function_name.split(":")
            region = region or parts[3]
            account_id = account_id or parts[4]
        backend = get_backend(account_id or DEFAULT_ACCOUNT_ID, region or self.region)
        fn = backend.get_function(function_name, qualifier)
        raw, errored, _logs, record = self._invoke(fn, {} if event is None else event)
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = raw
        return InvokeResult(payload, errored, record.error_type, record.request_id, raw)

    def run_moto_function(self, fn: Any, event: Any = None) -> tuple[str, bool, str]:
        """The replacement for `LambdaFunction._invoke_lambda`: (payload, errored, log tail)."""
        if event is None or event == "{}":  # moto passes the string "{}" for an empty body
            event = {}
        raw, errored, logs, _record = self._invoke(fn, event)
        return raw, errored, logs

    def _invoke(self, fn: Any, event: Any) -> tuple[str, bool, str, InvocationRecord]:
        function_name: str = fn.function_name
        request_id = str(uuid.uuid4())
        record: InvocationRecord | None = None
        self._notify("invocation_started", function_name, request_id)
        try:
            result = self._run_invocation(fn, event, request_id)
            record = result[3]
            return result
        finally:
            self._notify("invocation_finished", function_name, request_id, record)

    def _run_invocation(
        self, fn: Any, event: Any, request_id: str
    ) -> tuple[str, bool, str, InvocationRecord]:
        call = _Call.of(fn, self.region, request_id, self.real_timeout(float(fn.timeout or 3)))
        stream = self._acquire_stream(call.region, call.group, call.version)
        capture = InvocationCapture()
        started_at = time.time()
        start_ms = int(started_at * 1000)

        env = self._function_env(fn, call.region, call.group, stream)
        self._check_configuration(fn, env)
        self._stdio.install()  # re-assert the routing proxy if someone swapped sys.stdout since
        outcome = _Outcome()
        with _ENV_LOCK:
            # Environment applied and module imported under one lock hold: module-level reads of
            # os.environ see exactly this function's variables.
            self._env.enter(env)
            handler, init_ms, init_error = self._loaded_handler(str(fn.handler), capture)
        try:
            fault = self.faults.function_fault(call.function_name) if self.faults is not None else None
            if fault is None:
                duration_ms, timed_out = _run_until_cut_off(handler, event, call, fn, stream, capture, outcome)
            else:
                duration_ms, timed_out = _run_faulted(fault, handler, event, call, fn, stream, capture, outcome, self.time_scale)
        finally:
            with _ENV_LOCK:
                self._env.exit()

        end_ms = int(time.time() * 1000)
        lines = capture.close()  # an abandoned worker's later output is dropped from here on
        # Lambda's application log-level filter: what it drops reaches neither logs nor metrics.
        lines = lambda_logging.delivered(lines, lambda_logging.config_of(call.function_arn))
        raw, error_type, error_lines = _response(init_error, timed_out, outcome, call, end_ms)
        report = _report_line(request_id, duration_ms, call.memory, init_ms, timed_out)
        events = [(start_ms, f"START RequestId: {request_id} Version: {call.version}")]
        events += lines
        events += [(end_ms, line) for line in error_lines]
        events += [(end_ms, f"END RequestId: {request_id}"), (end_ms, report)]
        events = _monotonic(events)

        account = str(getattr(fn, "account_id", None) or _default_account())
        if self.publish_logs:
            self._write_logs(account, call.region, call.group, stream, events)
        if self.publish_metrics:
            self._publish_emf(account, call.region, lines)
        self._release_stream(call.region, call.group, call.version, stream)

        record = InvocationRecord(
            function_name=call.function_name,
            request_id=request_id,
            duration_ms=duration_ms,
            errored=error_type is not None,
            error_type=error_type,
            log_lines=tuple(line for _ts, line in events),
            payload=raw,
            timed_out=timed_out,
            log_stream_name=stream,
            started_at=started_at,
            ended_at=end_ms / 1000,
        )
        with self._records_cond:
            self._records.append(record)
            self._records_cond.notify_all()
        tail = "\n".join(record.log_lines).encode("utf-8")[-LOG_TAIL_BYTES:].decode("utf-8", "ignore")
        return raw, record.errored, tail, record

    def _loaded_handler(
        self, handler_name: str, capture: InvocationCapture
    ) -> tuple[Callable[..., Any] | None, float | None, _InitError | None]:
        """(handler, init milliseconds if it was imported now, init error). Call with `_ENV_LOCK`
        held and the function's environment entered: a cold import reads exactly its variables."""
        handler = self._handlers.get(handler_name)
        if handler is not None:
            return handler, None, None
        init_error: _InitError | None = None
        init_started = time.perf_counter()
        try:
            with capturing(capture):
                handler = _import_handler(handler_name)
            self._handlers[handler_name] = handler
        except _InitError as exc:
            init_error = exc
        except BaseException as exc:  # e.g. SystemExit at import
            init_error = _InitError(type(exc).__name__, str(exc), _stack_of(exc))
        return handler, (time.perf_counter() - init_started) * 1000, init_error

    # ---------------------------------------------------------------- helpers

    def _function_env(self, fn: Any, region: str, group: str, stream: str) -> dict[str, str]:
        env = {str(k): str(v) for k, v in (getattr(fn, "environment_vars", None) or {}).items()}
        if self.endpoint_url and "AWS_ENDPOINT_URL" not in env:
            env["AWS_ENDPOINT_URL"] = self.endpoint_url
        env.update(
            {
                "AWS_LAMBDA_FUNCTION_NAME": str(fn.function_name),
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(fn.memory_size or 128),
                "AWS_LAMBDA_FUNCTION_VERSION": str(getattr(fn, "version", None) or "$LATEST"),
                "AWS_LAMBDA_LOG_GROUP_NAME": group,
                "AWS_LAMBDA_LOG_STREAM_NAME": stream,
                "AWS_REGION": region,
                "AWS_DEFAULT_REGION": region,
                "AWS_EXECUTION_ENV": f"AWS_Lambda_{getattr(fn, 'run_time', None) or 'python3.11'}",
                "_HANDLER": str(fn.handler),
            }
        )
        # AWS_LAMBDA_LOG_FORMAT / AWS_LAMBDA_LOG_LEVEL from its LoggingConfig, as Lambda sets them.
        env.update(lambda_logging.environment(lambda_logging.config_of(str(fn.function_arn))))
        if "otlp" in env.get("OTEL_TRACES_EXPORTER", "").lower():
            # What the ADOT collector layer listens on (localhost:4318 on AWS): the sandbox's receiver.
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_receiver.shared().endpoint
        return env

    def _acquire_stream(self, region: str, group: str, version: str) -> str:
        """A log stream per busy "execution environment": reused when free, new when all are busy."""
        key = (region, group, version)
        with self._streams_lock:
            free = self._free_streams.setdefault(key, [])
            if free:
                return free.pop()
        today = dt.datetime.now(tz=dt.UTC)
        return f"{today:%Y/%m/%d}/[{version}]{uuid.uuid4().hex}"

    def _release_stream(self, region: str, group: str, version: str, stream: str) -> None:
        with self._streams_lock:
            self._free_streams.setdefault((region, group, version), []).append(stream)

    def _write_logs(
        self, account: str, region: str, group: str, stream: str, events: list[tuple[int, str]]
    ) -> None:
        """The invocation's log events into moto's Logs backend (group and stream made on demand)."""
        try:
            from moto.logs.exceptions import ResourceAlreadyExistsException
            from moto.logs.models import logs_backends

            logs = logs_backends[account][region]
            log_events = [{"timestamp": ts, "message": msg} for ts, msg in events]
            with self._streams_lock:  # two first invocations must not both create the group
                if group not in logs.groups:
                    with contextlib.suppress(ResourceAlreadyExistsException):  # made meanwhile elsewhere
                        logs.create_log_group(group, tags={})
                logs.ensure_log_stream(group, stream)
            logs.put_log_events(group, stream, log_events)
        except Exception:
            LOG.warning("could not write Lambda logs to %s/%s", group, stream, exc_info=True)

    def _publish_emf(self, account: str, region: str, lines: list[tuple[int, str]]) -> None:
        datums: list[emf.EmfDatum] = []
        for ts, line in lines:
            doc = emf.parse_emf(line)
            if doc is not None:
                datums.extend(emf.extract_datums(doc, dt.datetime.fromtimestamp(ts / 1000, tz=dt.UTC)))
        if not datums:
            return
        try:
            emf.publish_in_process(datums, account_id=account, region=region)
        except Exception:
            LOG.warning("could not publish EMF metrics", exc_info=True)


def _default_account() -> str:
    from moto.core import DEFAULT_ACCOUNT_ID

    return DEFAULT_ACCOUNT_ID


# --------------------------------------------------------------------------- worker and patches


def _run_handler(
    handler: Callable[..., Any],
    event: Any,
    context: LambdaContext,
    capture: InvocationCapture,
    outcome: _Outcome,
    running: RunningFunction | None = None,
) -> None:
    _RUNNING.set(running)  # this worker thread's own context: the handler's calls are its function's
    with capturing(capture):
        try:
            outcome.result = handler(event, context)
        except BaseException as exc:  # everything a handler raises is reported
            outcome.exc = exc
        finally:
            outcome.done.set()


def _error_document(exc: BaseException, request_id: str) -> tuple[str, str, str]:
    """(payload, errorType, [ERROR] log line) for an exception that escaped the handler."""
    if isinstance(exc, SystemExit):
        error_type = "Runtime.ExitError"
        message = f"RequestId: {request_id} Error: Runtime exited with error: exit status {exc.code}"
        return json.dumps({"errorType": error_type, "errorMessage": message}), error_type, message
    error_type = type(exc).__name__
    message = str(exc)
    stack = _stack_of(exc, skip=1)  # drop the runner's own frame
    doc = {"errorMessage": message, "errorType": error_type, "requestId": request_id, "stackTrace": stack}
    line = f"[ERROR] {error_type}: {message}\nTraceback (most recent call last):\n" + "".join(stack).rstrip(
        "\n"
    )
    return json.dumps(doc, default=str), error_type, line


@dataclass(frozen=True)
class _Call:
    """What one invocation of a function runs with, read once from moto's function."""

    function_name: str
    function_arn: str
    region: str
    version: str
    group: str
    timeout_s: float
    real_timeout: float
    memory: int
    request_id: str

    @classmethod
    def of(cls, fn: Any, default_region: str, request_id: str, real_timeout: float) -> _Call:
        function_name = str(fn.function_name)
        return cls(
            function_name=function_name,
            function_arn=str(fn.function_arn),
            region=getattr(fn, "region", None) or default_region,
            version=str(getattr(fn, "version", None) or "$LATEST"),
            group=f"/aws/lambda/{function_name}",
            timeout_s=float(fn.timeout or 3),
            real_timeout=real_timeout,
            memory=int(fn.memory_size or 128),
            request_id=request_id,
        )


def _run_until_cut_off(
    handler: Callable[..., Any] | None,
    event: Any,
    call: _Call,
    fn: Any,
    stream: str,
    capture: InvocationCapture,
    outcome: _Outcome,
) -> tuple[float, bool]:
    """Run the handler on a worker thread for at most its real timeout: (duration ms, timed out).
    A timed-out worker is abandoned, as AWS freezes the environment; no handler, no run."""
    run_started = time.perf_counter()
    timed_out = False
    if handler is not None:
        context = LambdaContext(
            function_name=call.function_name,
            function_version=call.version,
            invoked_function_arn=call.function_arn,
            memory_limit_in_mb=call.memory,
            aws_request_id=call.request_id,
            log_group_name=call.group,
            log_stream_name=stream,
            deadline_monotonic=time.monotonic() + call.real_timeout,
            real_timeout=call.real_timeout,
            timeout_seconds=call.timeout_s,
        )
        running = RunningFunction(
            function_name=call.function_name,
            function_arn=call.function_arn,
            role_arn=str(getattr(fn, "role", None) or ""),
            request_id=call.request_id,
        )
        worker = threading.Thread(
            target=_run_handler,
            args=(handler, event, context, capture, outcome, running),
            name=f"lambda:{call.function_name}:{call.request_id[:8]}",
            daemon=True,
        )
        worker.start()
        timed_out = not outcome.done.wait(call.real_timeout)
    return (time.perf_counter() - run_started) * 1000, timed_out


class InjectedError(Exception):
    """Raised in place of a handler by an injected `error` fault (its errorType is the fault's)."""


def _run_faulted(
    fault: Any,
    handler: Callable[..., Any] | None,
    event: Any,
    call: _Call,
    fn: Any,
    stream: str,
    capture: InvocationCapture,
    outcome: _Outcome,
    time_scale: TimeScale,
) -> tuple[float, bool]:
    """An invocation under an injected `FunctionFault`: (duration ms, timed out).

    timeout (or a delay as long as the Timeout): Lambda's timeout answer at once, its Duration the
    Timeout, without waiting it out. error: the handler does not run, the invocation fails with the
    fault's error type. delay: the handler starts after the scaled delay; Duration counts the
    virtual delay, as AWS would measure it."""
    if fault.effect == "timeout" or (fault.effect == "delay" and fault.delay_seconds >= call.timeout_s):
        return call.timeout_s * 1000, True
    if fault.effect == "error":
        error = type(fault.error_type.rsplit(".", 1)[-1], (InjectedError,), {})

        def failing(_event: Any, _context: Any) -> Any:
            raise error(f"sandbox fault {fault.name}: injected invocation error")

        return _run_until_cut_off(failing, event, call, fn, stream, capture, outcome)
    inner = handler

    def delayed(event_: Any, context: Any) -> Any:
        time.sleep(time_scale.scale(fault.delay_seconds))
        return inner(event_, context) if inner is not None else None

    duration_ms, timed_out = _run_until_cut_off(delayed if handler is not None else None, event, call, fn, stream, capture, outcome)
    if not timed_out:  # the delay as AWS measures it: virtual seconds, not the scaled wait
        duration_ms += (fault.delay_seconds - time_scale.scale(fault.delay_seconds)) * 1000
    return duration_ms, timed_out


def _response(
    init_error: _InitError | None, timed_out: bool, outcome: _Outcome, call: _Call, end_ms: int
) -> tuple[str, str | None, list[str]]:
    """(payload, errorType or None, error log lines), as the AWS Python runtime answers: an init
    failure first, then a timeout, then what the handler raised, else its marshalled result."""
    request_id = call.request_id
    if init_error is not None:
        doc = {
            "errorMessage": init_error.message,
            "errorType": init_error.error_type,
            "requestId": request_id,
            "stackTrace": init_error.stack,
        }
        return json.dumps(doc), init_error.error_type, [f"[ERROR] {init_error.error_type}: {init_error.message}"]
    if timed_out:
        message = f"Task timed out after {call.timeout_s:.2f} seconds"
        raw = json.dumps({"errorMessage": message, "errorType": TIMEOUT_ERROR_TYPE})
        stamp = dt.datetime.fromtimestamp(end_ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        return raw, TIMEOUT_ERROR_TYPE, [f"{stamp}Z {request_id} {message}"]
    if outcome.exc is not None:
        raw, error_type, error_line = _error_document(outcome.exc, request_id)
        return raw, error_type, [error_line]
    try:
        return json.dumps(outcome.result, default=_json_default), None, []
    except (TypeError, ValueError) as exc:
        error_type = "Runtime.MarshalError"
        message = f"Unable to marshal response: {exc}"
        raw = json.dumps({"errorMessage": message, "errorType": error_type, "requestId": ""})
        return raw, error_type, [f"[ERROR] {error_type}: {message}"]


def _report_line(request_id: str, duration_ms: float, memory: int, init_ms: float | None, timed_out: bool) -> str:
    report = (
        f"REPORT RequestId: {request_id}\tDuration: {duration_ms:.2f} ms\t"
        f"Billed Duration: {max(1, math.ceil(duration_ms))} ms\tMemory Size: {memory} MB\t"
        f"Max Memory Used: {_max_memory_mb(memory)} MB\t"
    )
    if init_ms is not None:
        report += f"Init Duration: {init_ms:.2f} ms\t"
    if timed_out:
        report += "Status: timeout"
    return report


def _monotonic(events: list[tuple[int, str]]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    last = 0
    for ts, line in events:
        last = max(last, ts)
        out.append((last, line))
    return out


def _max_memory_mb(limit: int) -> int:
    used = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # Linux: KiB
    return int(min(limit, max(1, used)))


def active_runtime() -> LambdaRuntime | None:
    """The runtime installed in this process, if any."""
    return lambda_invoke.SEAM.current()  # type: ignore[return-value]  # the seam holds what installed it
