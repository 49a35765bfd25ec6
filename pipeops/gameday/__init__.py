"""`pipeops gameday`: every known fault, one after another, on one fresh sandbox, with numbers.

The functional core judges plain observations (`verdict`, `invariants`); the shell (`runner`)
starts the sandbox, drives traffic and faults, and records what it saw; `report` draws it as one
self-contained HTML page and `docs` writes docs/GAMEDAY.md from the recorded last full run.
"""
