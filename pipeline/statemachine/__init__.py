"""The pipeline's Step Functions workflow: built in code, checked in as ASL JSON.

`pipeline.statemachine.build` holds the builder, the constants and `load_definition`; it is not
imported here so that `python -m pipeline.statemachine.build` runs without a runpy warning.
"""
