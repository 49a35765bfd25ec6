"""Alarm texts shortened for a line or a field: cut at a word, never inside one."""

from __future__ import annotations

ELLIPSIS = "…"


def shorten(text: str, width: int) -> str:
    """`text` (its whitespace collapsed) in at most `width` characters: cut at the last word
    boundary that fits, with an ellipsis; a single word longer than `width` is cut inside."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = text[: width - len(ELLIPSIS)]
    if " " in cut and not text[len(cut)].isspace():
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + ELLIPSIS
