"""A tiny PNG reader (8-bit RGB/RGBA, not interlaced): enough to check a Chromium screenshot.

The project takes no image library as a dependency for one test; zlib and the five PNG row filters
are all it needs.
"""

from __future__ import annotations

import struct
import zlib
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
    if kind == 0:
        return bytes(line)
    if kind == 2:
        return bytes((a + b) & 0xFF for a, b in zip(line, previous, strict=True))
    out = bytearray(line)
    if kind == 1:
        for i in range(bpp, len(out)):
            out[i] = (out[i] + out[i - bpp]) & 0xFF
    elif kind == 3:
        for i in range(len(out)):
            left = out[i - bpp] if i >= bpp else 0
            out[i] = (out[i] + ((left + previous[i]) >> 1)) & 0xFF
    elif kind == 4:
        for i in range(len(out)):
            left = out[i - bpp] if i >= bpp else 0
            up = previous[i]
            corner = previous[i - bpp] if i >= bpp else 0
            out[i] = (out[i] + _paeth(left, up, corner)) & 0xFF
    else:
        raise ValueError(f"unknown PNG filter type {kind}")
    return bytes(out)


def _paeth(left: int, up: int, corner: int) -> int:
    estimate = left + up - corner
    to_left, to_up, to_corner = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
    if to_left <= to_up and to_left <= to_corner:
        return left
    return up if to_up <= to_corner else corner
