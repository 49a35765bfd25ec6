"""The deployed stack's names, written once: its functions, their handlers, the service and the
default stack name.

template.yaml, the Makefile's build targets and samconfig.toml spell these too (YAML, make and
TOML cannot import them): tests/unit/test_facts.py holds each of them equal to this module.
"""

from __future__ import annotations

from enum import StrEnum

# Every function's `service` (logs, metrics, spans): template Globals POWERTOOLS_SERVICE_NAME, and
# what the pipeline says when that variable is not set (the sandbox, tests, a local run).
SERVICE_NAME = "pipeops-pipeline"
# `sam deploy`'s stack (samconfig.toml), the sandbox's and the CLI's when none is named.
DEFAULT_STACK_NAME = "pipeops"
# The variable through which the service name reaches powertools and the telemetry.
SERVICE_NAME_ENV = "POWERTOOLS_SERVICE_NAME"


class Function(StrEnum):
    """The stack's functions, by their logical id in template.yaml (a metric's `function`
    dimension carries the deployed name: `!Ref <logical id>`)."""

    INGEST = "IngestFunction"
    ROUTER = "RouterFunction"
    BATCH_TRIGGER = "BatchTriggerFunction"
    TRACKER = "WorkflowTrackerFunction"
    RECONCILER = "ReconcilerFunction"
    DETECT = "DetectFunction"
    GENERATE_SYNTHETIC = "GenerateSyntheticFunction"
    REDACT = "RedactFunction"
    FINALIZE = "FinalizeFunction"
    RUNBOOK = "RunbookFunction"

    @property
    def handler_module(self) -> str:
        return HANDLER_MODULES[self]

    @property
    def handler(self) -> str:
        """The template's `Handler`: every handler module names its entry point `handler`."""
        return f"{self.handler_module}.handler"

    @property
    def ships_monitors(self) -> bool:
        """Whether its artifact holds monitors/reconcile/ besides pipeline/ (the Makefile's
        RECONCILER_FUNCTIONS; the rest but the runbook's are PIPELINE_FUNCTIONS)."""
        return self.handler_module.startswith("monitors.")

    @property
    def ships_runbooks(self) -> bool:
        """Whether its artifact holds the runbook automation (runbooks/, stack/resources.py and the
        monitors it uses) besides pipeline/ (the Makefile's RUNBOOK_FUNCTIONS)."""
        return self.handler_module.startswith("runbooks.")


# The pipeline's handlers are in pipeline/handlers/, the sidecar's in monitors/, the runbook
# automation's (SSM Automation documents invoke it) in runbooks/automation/.
HANDLER_MODULES: dict[Function, str] = {
    Function.INGEST: "pipeline.handlers.ingest",
    Function.ROUTER: "pipeline.handlers.router",
    Function.BATCH_TRIGGER: "pipeline.handlers.batch_trigger",
    Function.TRACKER: "pipeline.handlers.workflow_tracker",
    Function.RECONCILER: "monitors.reconcile.handler",
    Function.DETECT: "pipeline.handlers.detect",
    Function.GENERATE_SYNTHETIC: "pipeline.handlers.generate_synthetic",
    Function.REDACT: "pipeline.handlers.redact",
    Function.FINALIZE: "pipeline.handlers.finalize",
    Function.RUNBOOK: "runbooks.automation.handler",
}
