"""The reconciler: observe -> plan -> act -> verify (docs/ARCHITECTURE.md#reconciler)."""
