"""The HTTP control of a served sandbox's faults (`sandbox.serving` routes it at CONTROL_PATH).

GET lists the faults in force; POST `{"spec": {...}}` injects one (`spec_to_json`'s shape);
DELETE clears `?name=NAME`, or every fault. Answers are JSON; a spec that cannot be injected is a
400 whose `message` says why, so a client outside the process can tell its user what to fix.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from sandbox.faults.board import FaultBoard
from sandbox.faults.specs import FaultSpecError, spec_from_json


def control(board: FaultBoard) -> Any:
    """The action answering CONTROL_PATH for `board`: (method, query, body) -> (status, answer)."""

    def act(method: str, query: str, body: bytes) -> tuple[int, Any]:
        if method == "GET":
            return 200, {"active": board.active()}
        if method == "DELETE":
            names = parse_qs(query).get("name") or []
            return 200, {"cleared": board.clear(names[0] if names else None)}
        if method != "POST":
            return 405, {"message": f"{method} is not GET, POST or DELETE"}
        try:
            request = json.loads(body or b"{}")
            spec = spec_from_json(request.get("spec") if isinstance(request, dict) else None)
        except (ValueError, FaultSpecError) as exc:
            return 400, {"message": str(exc)}
        try:
            return 200, {"injected": board.inject(spec)}
        except (KeyError, ValueError) as exc:  # a name the deployment does not know
            return 400, {"message": str(exc)}

    return act
