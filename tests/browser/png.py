"""A tiny PNG reader (8-bit RGB/RGBA, not interlaced): enough to check a Chromium screenshot.

The project takes no image library as a dependency for one test; zlib and the five PNG row filters
are all it needs.
"""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {2: 3, 6: 4}  # colour type -> bytes per pixel at 8 bits


@dataclass(frozen=True)
class Image:
    """Decoded pixels: `rows[y][x * channels : x * channels + 3]` is the RGB of pixel (x, y)."""

    width: int
    height: int
    channels: int
    rows: tuple[bytes, ...]

    def rgb(self, x: int, y: int) -> tuple[int, int, int]:
        offset = x * self.channels
        red, green, blue = self.rows[y][offset : offset + 3]
        return red, green, blue

    def colour_counts(self, left: int, top: int, right: int, bottom: int) -> Counter[tuple[int, int, int]]:
        """How many pixels of each RGB colour the rectangle holds (a screenshot has few colours: a
        check per colour, not per pixel)."""
        counts: Counter[tuple[int, int, int]] = Counter()
        start, stop, step = left * self.channels, right * self.channels, self.channels
        for y in range(top, bottom):
            row = self.rows[y][start:stop]
            counts.update(zip(row[0::step], row[1::step], row[2::step], strict=True))
        return counts


def read_png(path: str | Path) -> Image:
    data = Path(path).read_bytes()
    if not data.startswith(SIGNATURE):
        raise ValueError(f"{path} is not a PNG")
    header, compressed = _chunks(data)
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or colour not in CHANNELS or interlace != 0:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    channels = CHANNELS[colour]
    raw = zlib.decompress(compressed)
    stride = width * channels
    if len(raw) != height * (stride + 1):
        raise ValueError(f"{path}: {len(raw)} bytes of image data for {width}x{height}")
    rows: list[bytes] = []
    previous = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        row = _unfilter(raw[start], raw[start + 1 : start + 1 + stride], previous, channels)
        rows.append(row)
        previous = row
    return Image(width, height, channels, tuple(rows))


def _chunks(data: bytes) -> tuple[bytes, bytes]:
    """IHDR's payload and the concatenated IDAT payloads, checking every chunk's CRC."""
    position, header, idat = len(SIGNATURE), b"", bytearray()
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        payload = data[position + 8 : position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length : position + 12 + length])
        if zlib.crc32(kind + payload) != crc:
            raise ValueError(f"bad CRC in {kind!r} chunk")
        if kind == b"IHDR":
            header = payload
        elif kind == b"IDAT":
            idat += payload
        elif kind == b"IEND":
            break
        position += 12 + length
    return header, bytes(idat)


def _unfilter(kind: int, line: bytes, previous: bytes, bpp: int) -> bytes:
    """Undo one row's filter. Sub and Up are byte-wise sums, done on whole rows as integers (the
    test decodes screenshots of thousands of rows); Average and Paeth go byte by byte."""
    if kind == 0:
        return bytes(line)
    if kind == 1:  # each byte plus the one bpp before it, already decoded: a running sum, stride bpp
        row, step = int.from_bytes(line, "big"), bpp
        while step < len(line):
            row = _add_bytes(row, row >> (8 * step), len(line))
            step *= 2
        return row.to_bytes(len(line), "big")
    if kind == 2:
        return _add_bytes(int.from_bytes(line, "big"), int.from_bytes(previous, "big"), len(line)).to_bytes(len(line), "big")
    out = bytearray(line)
    first = min(bpp, len(out))  # no byte to the left: the left and corner predictors are 0
    if kind == 3:
        for i in range(first):
            out[i] = (out[i] + (previous[i] >> 1)) & 0xFF
        for i in range(bpp, len(out)):
            out[i] = (out[i] + ((out[i - bpp] + previous[i]) >> 1)) & 0xFF
    elif kind == 4:
        for i in range(first):
            out[i] = (out[i] + previous[i]) & 0xFF
        for i in range(bpp, len(out)):  # Paeth, inline (a call per byte is most of its cost)
            left, up, corner = out[i - bpp], previous[i], previous[i - bpp]
            to_left, to_up, to_corner = abs(up - corner), abs(left - corner), abs(left + up - 2 * corner)
            if to_left <= to_up and to_left <= to_corner:
                out[i] = (out[i] + left) & 0xFF
            else:
                out[i] = (out[i] + (up if to_up <= to_corner else corner)) & 0xFF
    else:
        raise ValueError(f"unknown PNG filter type {kind}")
    return bytes(out)


def _add_bytes(a: int, b: int, size: int) -> int:
    """Byte-wise sum modulo 256 of two `size`-byte big-endian integers (no carry between bytes)."""
    low, high = int.from_bytes(b"\x7f" * size, "big"), int.from_bytes(b"\x80" * size, "big")
    return ((a & low) + (b & low)) ^ ((a ^ b) & high)

