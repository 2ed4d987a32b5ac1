"""Files damaged on purpose: bytes flipped inside one stored segment, so that its codec
fails (or decodes to other values) while the header stays intact."""

from __future__ import annotations

from pathlib import Path

import tifffile


def flip_bytes(path: Path, offset: int, length: int) -> None:
    """Flip every seventh byte of ``length`` bytes at ``offset``, leaving five at each end."""
    content = bytearray(path.read_bytes())
    for i in range(offset + 5, offset + length - 5, 7):
        content[i] ^= 0x5A
    path.write_bytes(bytes(content))


def damage_strip(path: Path, strip: int) -> None:
    """Flip bytes inside strip (or tile) ``strip`` of the TIFF's first image."""
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        offset = page.dataoffsets[strip]  # type: ignore[union-attr]
        length = page.databytecounts[strip]  # type: ignore[union-attr]
    flip_bytes(path, offset, length)
