"""The sandbox composed for this pipeline: the one place that knows both.

The sandbox (sandbox/) acts as AWS for any handler code and imports nothing of the pipeline; the
pipeline's handlers keep state per function (collaborators built once, the cold-start mark), which
AWS drops when a function's configuration changes (new execution environments). The composer
registers that forgetting with the sandbox: `pipeops demo`, `pipeops sandbox up` and the tests
build their sandboxes here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.sandbox import Sandbox


def forget_function_state(function_name: str) -> None:
    """The pipeline's per-function state of `function_name`: its collaborators and its cold-start
    mark; its next invocation starts as in a new execution environment."""
    from pipeline.handlers import _wiring
    from pipeline.telemetry.handler import forget_warm

    _wiring.forget(function_name)
    forget_warm(function_name)


def pipeline_sandbox(**settings: Any) -> Sandbox:
    """A `Sandbox` (not started) with `settings`, and the pipeline's fresh-environment hook."""
    from sandbox.sandbox import Sandbox

    return Sandbox(fresh_environment_hooks=(forget_function_state,), **settings)
