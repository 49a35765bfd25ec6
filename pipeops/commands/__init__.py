"""One module per command group of `pipeops`: each command parses its options, calls one library
function and renders the typed result it returns (`pipeops.cli` puts them on the app)."""
