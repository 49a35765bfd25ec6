"""The sidecar on a pipeline we did not build: its description (`config`) and the standalone SAM
template that watches and repairs it without changing any of its resources (`build`)."""
