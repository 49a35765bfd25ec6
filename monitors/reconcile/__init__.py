"""The reconciler: observe -> plan -> act -> verify (DESIGN.md §3)."""
