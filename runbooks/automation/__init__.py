"""Runbook automation: the runbooks that carry their remedy out.

Each acting runbook is diagnose (read only: the evidence, PII-safe) -> plan (a pure function of the
evidence) -> apply (conditional writes, paced, each audited in the coordination table like the
reconciler's repairs) -> verify (read again: cleared or not). `engine.run_runbook` runs one; the
CLI and, later, an SSM Automation document call it. In the runbooks layer: it imports the
pipeline's stores, the stack's resources and the runbook catalog, never the alarms or anything
above them.
"""
