"""Every store and its in-memory stand-in offer exactly their protocol: the same public methods,
with the same parameters (names, kinds, defaults). A method added to a store without its
protocol, or a stand-in that drifts from the store it stands for, fails here."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from pipeline.stores.audit import AuditStore
from pipeline.stores.claims import ClaimsStore
from pipeline.stores.executions import ExecutionsStore
from pipeline.stores.protocols import (
    AuditProtocol,
    ClaimsProtocol,
    ExecutionsProtocol,
    RunIndexProtocol,
    SemaphoreProtocol,
    TrackingProtocol,
)
from pipeline.stores.run_index import RunIndex
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import TrackingStore
from tests.property.memory import (
    MemoryAudit,
    MemoryClaims,
    MemoryExecutions,
    MemoryRunIndex,
    MemorySemaphore,
    MemoryTrackingStore,
)

# Methods a stand-in has beyond its protocol, for the tests that drive it (the world's side).
TEST_ONLY = {MemorySemaphore: {"state", "hand_edit"}, MemoryExecutions: {"begin", "end"}}
# Each implementation and the protocol it implements.
IMPLEMENTATIONS: list[tuple[type, tuple[type, ...]]] = [
    (Semaphore, (SemaphoreProtocol,)),
    (MemorySemaphore, (SemaphoreProtocol,)),
    (ExecutionsStore, (ExecutionsProtocol,)),
    (MemoryExecutions, (ExecutionsProtocol,)),
    (TrackingStore, (TrackingProtocol,)),
    (ClaimsStore, (ClaimsProtocol,)),
    (MemoryTrackingStore, (TrackingProtocol,)),
    (MemoryClaims, (ClaimsProtocol,)),
    (RunIndex, (RunIndexProtocol,)),
    (MemoryRunIndex, (RunIndexProtocol,)),
    (AuditStore, (AuditProtocol,)),
    (MemoryAudit, (AuditProtocol,)),
]


def members(protocol: type) -> dict[str, Any]:
    """The protocol's members: methods and properties by definition, attributes by annotation."""
    found = {name: value for name, value in vars(protocol).items() if not name.startswith("_")}
    return found | {name: None for name in getattr(protocol, "__annotations__", {})}


def shape(member: Any) -> list[tuple[str, Any, Any]] | str:
    """What a caller relies on: the parameters' names, kinds and defaults (not their annotations:
    a stand-in's guard is its own type). A property or a plain attribute is just that."""
    if member is None:
        return "attribute"
    if isinstance(member, property):
        return "property"
    return [(p.name, p.kind, p.default) for p in inspect.signature(member).parameters.values()]


@pytest.mark.parametrize(("implementation", "protocols"), IMPLEMENTATIONS, ids=[i.__name__ for i, _ in IMPLEMENTATIONS])
def test_each_store_and_stand_in_offers_exactly_its_protocols(implementation: type, protocols: tuple[type, ...]) -> None:
    expected = {name: member for protocol in protocols for name, member in members(protocol).items()}
    public = {name for name in dir(implementation) if not name.startswith("_")}
    extra = public - set(expected) - TEST_ONLY.get(implementation, set())
    assert not extra, f"{implementation.__name__} has public methods outside its protocol: {sorted(extra)}"
    for name, member in expected.items():
        if member is None:  # an attribute: the constructor takes it and keeps it under its name
            assert name in inspect.signature(implementation).parameters, f"{implementation.__name__} lacks {name}"
            continue
        assert hasattr(implementation, name), f"{implementation.__name__} lacks {name}"
        assert shape(inspect.getattr_static(implementation, name)) == shape(member), f"{implementation.__name__}.{name}"


def test_a_drifted_stand_in_is_caught() -> None:
    """The check above can fail: a stand-in whose `release` grew a parameter differs in shape."""

    class Drifted(MemorySemaphore):
        def release(self, holder: str, force: bool = False) -> Any:  # type: ignore[override]
            return super().release(holder)

    assert shape(Drifted.release) != shape(SemaphoreProtocol.release)
