"""The embedded sandbox: moto as the AWS, template.yaml deployed into it, the real handlers running.

One object wires the parts that each add one missing behaviour of AWS (docs/ARCHITECTURE.md#what-the-sandbox-adds-to-moto):

    moto (in-process `mock_aws`, or a `ThreadedMotoServer` on loopback)
      + sandbox.deploy   template.yaml → SAM transform → moto CloudFormation, corrected in one place
      + LambdaRuntime    real Python handlers behind every Lambda route, timeouts, logs, EMF metrics
      + SqsEventSourcePoller   SQS event-source mappings with batches and partial batch failures
      + EventBus         EventBridge Lambda targets, S3 "Object Created", execution status changes,
                         schedules, retries and dead letters
      + SqsMetricsPublisher    the AWS/SQS CloudWatch metrics (age of the oldest message, counts)
      + AwsMetricsPublisher    the AWS/Lambda and AWS/States CloudWatch metrics (invocations,
                               errors, duration, concurrency; executions by outcome, their time)
      + AlarmEngine      CloudWatch alarms (metric and composite) evaluated every virtual minute
                         from moto's datapoints, state changes notified to their SNS actions
      + IamEnforcement   every AWS call of a handler or the state machine checked against its
                         role's policies as deployed; outside them it fails with AccessDenied

`Sandbox` is used by the tests (in-process), by `pipeops demo` (in-process) and by
`pipeops sandbox up` (served on 127.0.0.1, so other processes can point boto3 at it).
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from alarms.live import CLOCK_PATH
from sandbox import seams
from sandbox.alarm_engine import AlarmEngine
from sandbox.aws_metrics import AwsMetricsPublisher
from sandbox.clients import INTERNAL_USER_AGENT, ClientCache
from sandbox.clock import TimeScale
from sandbox.deploy import Deployment, deploy, samconfig_stack_name
from sandbox.eventbus import EventBus
from sandbox.faults import CONTROL_PATH, FaultBoard
from sandbox.faults.control import control
from sandbox.iam_enforcement import IamEnforcement
from sandbox.runtime import LambdaRuntime
from sandbox.seams import handler_calls, iam_calls, limits
from sandbox.serving import GatedMotoServer, ReadinessGate
from sandbox.sqs_metrics import SqsMetricsPublisher
from sandbox.sqs_poller import SqsEventSourcePoller
from stack.template import PROJECT_ROOT, load_template

if TYPE_CHECKING:
    from moto.core.config import DefaultConfig

LOG = logging.getLogger("sandbox")
REGION = "us-east-1"
EXECUTING: DefaultConfig = {"stepfunctions": {"execute_state_machine": True}}
# Tests and the demo run 20x faster than real time: a 60 s Lambda timeout cuts off after 3 s.
DEFAULT_TIME_SCALE = TimeScale(0.05)
# A 2-core machine under load can stall a handler for seconds; 30 s never cuts one off early.
DEFAULT_MIN_HANDLER_SECONDS = 30.0
# A run of 100 files on a loaded 2-core machine takes minutes; 10 never times a healthy one out.
DEFAULT_MIN_WORKFLOW_SECONDS = 600.0
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "sandbox",
    "AWS_SECRET_ACCESS_KEY": "sandbox",
    "AWS_SESSION_TOKEN": "sandbox",
}
_NOISY_LOGGERS = ("moto.stepfunctions.parser", "werkzeug", "moto")


# Template parameters that are waits (seconds, as SQS delays): the time scale shortens them too.
WAIT_PARAMETERS = ("FolderSettleSeconds", "CapacityRetrySeconds", "BacklogStallSeconds")


# The in-process sandboxes running in this process: they have no endpoint to ask for their clock,
# so `pipeops alarms check` run in the same process (the tests, a demo) asks here.
_IN_PROCESS: list[Sandbox] = []


def in_process_clock() -> dict[str, Any] | None:
    """The alarm engine's clock of the in-process sandbox running here (the latest started), if any."""
    running = [sandbox for sandbox in _IN_PROCESS if sandbox.alarms is not None]
    return running[-1]._clock() if running else None


def scaled_parameters(parameters: Mapping[str, str], time_scale: TimeScale) -> dict[str, str]:
    """Stack parameters with the template's default waits scaled; explicit values win."""
    declared = load_template()["Parameters"]
    scaled = {
        name: str(round(time_scale.scale(float(declared[name]["Default"])))) for name in WAIT_PARAMETERS
    }
    return scaled | dict(parameters)


@dataclass
class Sandbox:
    """The whole embedded AWS. Use as a context manager; `serve=True` serves it on loopback."""

    stack_name: str = field(default_factory=samconfig_stack_name)  # the name `sam deploy` gives it
    parameters: Mapping[str, str] = field(default_factory=dict)
    region: str = REGION
    time_scale: TimeScale = DEFAULT_TIME_SCALE
    serve: bool = False
    port: int = 0
    manage_mock: bool = True  # False when the caller already runs `mock_aws` (pytest fixtures)
    # The time scale shortens waits, not the time a handler may take: a function runs for at least
    # this many real seconds (or its whole Timeout, if smaller) before it is cut off.
    min_handler_seconds: float = DEFAULT_MIN_HANDLER_SECONDS
    # Likewise the state machine's TimeoutSeconds (25 minutes) is shortened, but not below this.
    min_workflow_seconds: float = DEFAULT_MIN_WORKFLOW_SECONDS
    # IAM, as AWS does it: each AWS call a handler (or the state machine) makes is checked against
    # its role's policies in the deployed stack; one outside them fails with AccessDenied
    # (sandbox.iam_enforcement). `iam.calls` records every decision. False: moto's "all allowed".
    enforce_iam: bool = True
    # Called with a function's name when its configuration changed since its last invocation
    # (`LambdaRuntime.on_fresh_environments`): whoever composes the sandbox with handler code that
    # keeps state per function (the pipeline: `pipeops.pipeline_sandbox`) drops that state here.
    fresh_environment_hooks: Sequence[Callable[[str], None]] = ()

    deployment: Deployment | None = field(default=None, init=False)
    runtime: LambdaRuntime | None = field(default=None, init=False)
    poller: SqsEventSourcePoller | None = field(default=None, init=False)
    bus: EventBus | None = field(default=None, init=False)
    sqs_metrics: SqsMetricsPublisher | None = field(default=None, init=False)
    aws_metrics: AwsMetricsPublisher | None = field(default=None, init=False)
    alarms: AlarmEngine | None = field(default=None, init=False)  # `alarms.evaluate_now()` forces a pass
    iam: IamEnforcement | None = field(default=None, init=False)  # kept after stop: records stay readable
    # The faults injected now (`sandbox.faults`): `faults.inject(spec)`, `faults.clear()`; served,
    # also over HTTP at `sandbox.faults.CONTROL_PATH`. Kept after stop: its history stays readable.
    faults: FaultBoard | None = field(default=None, init=False)
    endpoint_url: str | None = field(default=None, init=False)
    _mock: Any = field(default=None, init=False, repr=False)
    _server: Any = field(default=None, init=False, repr=False)
    _saved_env: dict[str, str | None] = field(default_factory=dict, init=False, repr=False)
    _clients: ClientCache | None = field(default=None, init=False, repr=False)
    _gate: ReadinessGate = field(default_factory=ReadinessGate, init=False, repr=False)
    _seams_installed: bool = field(default=False, init=False, repr=False)
    _iam_installed: bool = field(default=False, init=False, repr=False)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Sandbox:
        """Deploy and start every part; served, the endpoint answers others only once all run."""
        for name in _NOISY_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)
        self._set_env({"AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region})
        for name, value in FAKE_CREDENTIALS.items():
            if self.serve or not os.environ.get(name):
                self._set_env({name: value})
        try:
            seams.install()
            limits.install()  # AWS's 256 KB state and input, 400 KB item: a test of size means something
            self._seams_installed = True
            self.faults = FaultBoard(self.time_scale, self._physical_name, region=self.region, on_first_call_fault=handler_calls.SEAM.attach)
            self._start_aws()
            if self.enforce_iam:
                self.iam = IamEnforcement(self.region, self.endpoint_url)
                iam_calls.SEAM.attach(self.iam)
                self._iam_installed = True
            self.runtime = LambdaRuntime(
                region=self.region,
                endpoint_url=self.endpoint_url,
                time_scale=self.time_scale,
                extra_sys_path=[PROJECT_ROOT],
                min_real_timeout=self.min_handler_seconds,
            ).install()
            for hook in self.fresh_environment_hooks:
                self.runtime.on_fresh_environments(hook)
            self.runtime.faults = self.faults
            # Listening before anything can invoke a function or start an execution.
            self.aws_metrics = AwsMetricsPublisher(
                self.runtime, region=self.region, endpoint_url=self.endpoint_url
            ).start()
            self.deployment = deploy(
                self.stack_name,
                parameters=scaled_parameters(self.parameters, self.time_scale),
                region=self.region,
                endpoint_url=self.endpoint_url,
                time_scale=self.time_scale,
                min_timeout_seconds=self.min_workflow_seconds,
            )
            self.poller = SqsEventSourcePoller(
                self.runtime, region=self.region, endpoint_url=self.endpoint_url, poll_wait_seconds=0
            ).start()
            self.bus = EventBus(self.runtime, region=self.region, endpoint_url=self.endpoint_url)
            self.bus.faults = self.faults
            self.faults.on_clear(self.bus.fault_ended)
            self.bus.start()
            self.sqs_metrics = SqsMetricsPublisher(
                region=self.region, endpoint_url=self.endpoint_url, time_scale=self.time_scale
            ).start()
            self.alarms = AlarmEngine(
                region=self.region, endpoint_url=self.endpoint_url, time_scale=self.time_scale
            ).start()
        except BaseException as exc:
            self._gate.fail(f"{type(exc).__name__}: {exc}")
            self.stop()
            raise
        self._gate.open()
        if not self.serve:
            _IN_PROCESS.append(self)
        return self

    @property
    def ready(self) -> bool:
        """Every part runs: a served sandbox now answers requests other than its own."""
        return self._gate.ready

    def _start_aws(self) -> None:
        if self.serve:
            routes = {CLOCK_PATH: self._clock}  # `pipeops alarms check` judges on the engine's clock
            actions = {CONTROL_PATH: control(self.faults)} if self.faults is not None else {}
            self._server = GatedMotoServer(
                self._gate, ip_address="127.0.0.1", port=self.port, routes=routes, actions=actions
            )
            self._server.start()
            host, port = self._server.get_host_and_port()
            self.endpoint_url = f"http://{host}:{port}"
            # Step Functions tasks call Lambda back over HTTP; handlers reach the server too.
            self._set_env({"MOTO_PORT": str(port), "AWS_ENDPOINT_URL": self.endpoint_url})
            request = urllib.request.Request(
                f"{self.endpoint_url}/moto-api/config",
                data=json.dumps(EXECUTING).encode(),
                method="POST",
                headers={"User-Agent": INTERNAL_USER_AGENT},
            )
            urllib.request.urlopen(request, timeout=10).close()
        elif self.manage_mock:
            from moto import mock_aws

            self._mock = mock_aws(config=EXECUTING)
            self._mock.start()

    def _physical_name(self, name: str) -> str:
        """A template logical id's physical name in the deployed stack; any other name as given."""
        if self.deployment is None:
            return name
        return self.deployment.resources.get(name, name)

    def _clock(self) -> dict[str, Any]:
        """The clock the alarm engine evaluates on (before it starts: its time scale from now)."""
        if self.alarms is not None:
            return self.alarms.clock_info()
        return {"origin": datetime.now(UTC).isoformat(), "time_scale": self.time_scale.factor}

    def stop(self) -> None:
        """Stop delivering, let running executions end, then take everything down."""
        if self in _IN_PROCESS:
            _IN_PROCESS.remove(self)
        if self.alarms is not None:  # first: no evaluation against parts going away
            try:
                self.alarms.stop()
            except Exception:
                LOG.warning("the alarm engine did not stop cleanly", exc_info=True)
            self.alarms = None
        if self.faults is not None:  # held events delivered while the bus still runs
            self.faults.close()
            handler_calls.SEAM.detach(self.faults)
        for part in (self.sqs_metrics, self.bus, self.poller, self.aws_metrics):
            if part is not None:
                try:
                    part.stop()
                except Exception:  # keep tearing down
                    LOG.warning("sandbox part did not stop cleanly", exc_info=True)
        if self.deployment is not None:
            try:
                self._abort_running_executions()
            except Exception:
                LOG.warning("could not stop running executions", exc_info=True)
        if self.runtime is not None and self.runtime.installed:
            self.runtime.uninstall()
        # Before moto goes: an abandoned handler thread's late call then passes unchecked.
        if self._iam_installed and self.iam is not None:
            iam_calls.SEAM.detach(self.iam)
            self._iam_installed = False
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        if self._seams_installed:
            limits.uninstall()
            seams.uninstall()
            self._seams_installed = False
        if self._server is not None:
            self._server.stop()
            self._server = None
            # The served config lives in this process's moto: later in-process mocks must not inherit it.
            from moto.core.config import default_user_config

            default_user_config["stepfunctions"] = {"execute_state_machine": False}
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env.clear()
        self.bus = self.poller = self.sqs_metrics = self.aws_metrics = None

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _set_env(self, values: Mapping[str, str]) -> None:
        for name, value in values.items():
            self._saved_env.setdefault(name, os.environ.get(name))
            os.environ[name] = value

    def _abort_running_executions(self, timeout: float = 10.0) -> None:
        """moto runs executions on threads that outlive the mock: end them before leaving."""
        sfn = self.client("stepfunctions")
        arn = self.outputs["StateMachineArn"]
        for execution in self._running(sfn, arn):
            sfn.stop_execution(executionArn=execution["executionArn"])
        deadline = time.monotonic() + timeout
        while self._running(sfn, arn) and time.monotonic() < deadline:
            time.sleep(0.05)

    @staticmethod
    def _running(sfn: Any, arn: str) -> list[dict[str, Any]]:
        pages = sfn.get_paginator("list_executions").paginate(stateMachineArn=arn, statusFilter="RUNNING")
        return [e for page in pages for e in page["executions"]]

    # -- use ----------------------------------------------------------------------------------

    @property
    def outputs(self) -> Mapping[str, str]:
        if self.deployment is None:
            raise RuntimeError("the sandbox is not started")
        return self.deployment.outputs

    def client(self, service: str) -> Any:
        """The sandbox's own client of `service` (never checked by IAM), made once."""
        clients = self._clients
        if clients is None or clients.endpoint_url != self.endpoint_url:
            clients = self._clients = ClientCache(self.region, self.endpoint_url)
        return clients.client(service)

    def wait_until_idle(self, timeout: float = 120.0) -> bool:
        """True once nothing is queued, delivered, retried or running anywhere in the sandbox."""
        assert self.poller is not None and self.bus is not None
        deadline = time.monotonic() + timeout
        sfn = self.client("stepfunctions")
        while time.monotonic() < deadline:
            remaining = max(0.1, deadline - time.monotonic())
            quiet = (
                self.poller.wait_until_idle(timeout=min(remaining, 5))
                and self.bus.wait_until_idle(timeout=min(remaining, 5))
                and not self._running(sfn, self.outputs["StateMachineArn"])
            )
            if quiet and self.poller.idle() and self.bus.wait_until_idle(timeout=0.5):
                if self.aws_metrics is not None:  # what the work produced is readable in CloudWatch
                    self.aws_metrics.flush(timeout=max(0.1, deadline - time.monotonic()))
                return True
            time.sleep(0.05)
        return False

