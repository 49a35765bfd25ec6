"""Every patch of moto (and of the few botocore and threading methods) the sandbox makes, one module
a seam, each named once here.

Pinned to moto 5.2 (pyproject allows >=5.2.5,<5.3): each seam names the moto function it replaces,
and its test in tests/sandbox fails when one moves. Every seam is one list of `patching.Patch`es
installed by a counted `patching.CountedPatches` (one uninstall per install; patches that stack on
one attribute go on in order and come off in reverse). Each module's docstring says what moto lacks
or does, what the seam adds, and its kind:

- BEHAVIOUR: moto does not do what AWS does, and a test of the pipeline would pass in moto and fail
  on AWS (or the reverse) without the seam.
- SPEED: moto does what AWS does, slowly; the seam changes nothing a caller can see. One is kept
  only while the suite's or the demo's time needs it: its docstring says what it saves.
  Measured with `pipeops demo` (CPU seconds, one seam off at a time, a loaded 2-core machine; all
  on: 20.9 to 25.2): parse-once off 28.1 (kept); JSONPath-once 24.9, transactions 24.2, Query
  24.0 (kept: above the all-on median, and the last two bound costs that grow with the tables,
  which the 2,000-file test and a long-served sandbox reach); the interpreter's client reuse
  23.5, in-process Lambda tasks 22.3 and the wire-form DynamoDB serializer 22.6 (deleted).

Installed by every sandbox (`install()` below), in this order:
  template_json          BEHAVIOUR  a JSON template body read as JSON, not as YAML 1.1
  dynamodb_transactions  SPEED      a transaction backs up its items, not its tables
  dynamodb_atomic        BEHAVIOUR  item writes atomic across threads
  sqs_receive_atomic     BEHAVIOUR  a receive atomic across threads (no message handed out twice)
  asl_parse_once         SPEED      a definition parsed once, not at every start
  execution_status       BEHAVIOUR  an execution that exists is RUNNING
  jsonpath_once          SPEED      a JSONPath parsed once
  dynamodb_query         SPEED      a Query reads its partition, not the table
  cloudwatch_reads       BEHAVIOUR  percentiles and exact dimension sets; reads cost their window
With the parts that need them:
  limits                 BEHAVIOUR  AWS's 256 KiB payload and 400 KB item limits (`sandbox.sandbox`)
  lambda_invoke          BEHAVIOUR  real handlers behind every Lambda route (`sandbox.runtime`)
  sqs_native_mappings    BEHAVIOUR  moto's own SQS -> Lambda delivery off (`sandbox.sqs_poller`)
  eventbridge_routes     BEHAVIOUR  Lambda targets, AWS-shaped S3 events (`sandbox.eventbus`)
  execution_events       BEHAVIOUR  execution status changes seen (`sandbox.status_events`)
  composite_alarms       BEHAVIOUR  PutCompositeAlarm (`sandbox.alarm_engine`)
  iam_calls              BEHAVIOUR  every handler's AWS call checked (`sandbox.iam_enforcement`)
  handler_calls          BEHAVIOUR  a handler's calls throttled, failed or crashed on demand (`sandbox.faults`)
"""

from __future__ import annotations

from sandbox.seams import (
    asl_parse_once,
    cloudwatch_reads,
    dynamodb_atomic,
    dynamodb_query,
    dynamodb_transactions,
    execution_status,
    jsonpath_once,
    sqs_receive_atomic,
    template_json,
)
from sandbox.seams.patching import CountedPatches, Patch

# In the order they go on. The transaction seam is listed before the DynamoDB lock, which then
# wraps it: no other write lands between its backup and its restore.
ALWAYS_ON = (
    template_json,
    dynamodb_transactions,
    dynamodb_atomic,
    sqs_receive_atomic,
    asl_parse_once,
    execution_status,
    jsonpath_once,
)


def _patches() -> list[Patch]:
    return [patch for seam in ALWAYS_ON for patch in seam.patches()]


def _install_reads() -> None:
    # reads that cost what they ask for: last on, first off
    dynamodb_query.install()
    cloudwatch_reads.install()


def _uninstall_reads() -> None:
    cloudwatch_reads.uninstall()
    dynamodb_query.uninstall()


_PATCHES = CountedPatches(
    _patches,
    marker="__pipeops_seam__",
    after_install=_install_reads,
    before_uninstall=_uninstall_reads,
)

# Counted: one uninstall per install.
install, uninstall, installed = _PATCHES.install, _PATCHES.uninstall, _PATCHES.installed
