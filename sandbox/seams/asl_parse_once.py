"""SPEED seam: each state machine definition is parsed once, not at every execution start.

What moto does: it parses the whole ASL with an ANTLR parser at every `start_execution`
(`ExecutionWorker._get_evaluation_entrypoint`), although a version's definition never changes
(measured with bench/sandbox_ratio.py: about 100 ms a start, the largest single share of the
sandbox's CPU).

What it changes (no behaviour): the parsed program is cached per definition text. It is a tree of
evaluation components that keep no per-execution state (the execution's state, its ARN and its
machine's ARN live in its `Environment`), so executions share it. An update or a new version with
another definition is parsed again; the parse moto does to validate a definition at create/update
(`StepFunctionsParserBackend._validate_definition`) is the one its executions then use. The parsed
programs outlive an uninstall: the next sandbox in the process starts executions of the same
definitions.
"""

from __future__ import annotations

import collections
import functools
import threading
from collections.abc import Callable
from typing import Any

from sandbox.seams.patching import Patch

KIND = "SPEED"
PARSED_CACHE_SIZE = 64


class ParsedDefinitions:
    """Parsed ASL programs by definition text (an LRU); counts the parses it did."""

    def __init__(self, size: int = PARSED_CACHE_SIZE) -> None:
        self._size = size
        self._programs: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.parses = 0

    def program(self, definition: str, parse: Callable[[str], Any]) -> Any:
        with self._lock:
            program = self._programs.get(definition)
            if program is not None:
                self._programs.move_to_end(definition)
                return program
        program = parse(definition)  # outside the lock: two first starts may both parse, once each
        with self._lock:
            self.parses += 1
            self._programs[definition] = program
            while len(self._programs) > self._size:
                self._programs.popitem(last=False)
        return program

    def __contains__(self, definition: object) -> bool:
        with self._lock:
            return definition in self._programs

    def clear(self) -> None:
        with self._lock:
            self._programs.clear()


PARSED = ParsedDefinitions()


def _parse(definition: str) -> Any:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    return AmazonStateLanguageParser.parse(definition)[0]


def _cached_entrypoint(worker: Any) -> Any:
    return PARSED.program(str(worker._evaluation_details.state_machine_details.definition), _parse)


def _validated_once(original: Callable[[str], Any]) -> Callable[[str], Any]:
    @functools.wraps(original)
    def _validate_definition(definition: str) -> None:
        try:
            PARSED.program(definition, _parse)  # valid: parsed, and kept for the executions
        except Exception:
            original(definition)  # raises moto's InvalidDefinition, worded as moto words it
            raise

    return _validate_definition


def patches() -> list[Patch]:
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    return [
        Patch(ExecutionWorker, "_get_evaluation_entrypoint", lambda _original: _cached_entrypoint),
        Patch(
            StepFunctionsParserBackend,
            "_validate_definition",
            lambda original: staticmethod(_validated_once(original.__func__)),
        ),
    ]
