"""Band planes copied out of pixel-interleaved samples: OpenCV's split writes the same
bits as NumPy's strided copy, and every layout it does not take is left to NumPy."""

from __future__ import annotations

import cv2  # the test extra installs OpenCV: its absence is a failure, not a skip
import numpy as np
import pytest

from virtualizarr_fill.reads import deinterleave


def _interleaved(rows: int, cols: int, bands: int, dtype: str, seed: int) -> np.ndarray:
    """A ``(band, y, x)`` view of random ``(y, x, band)`` samples (any bits, NaNs too)."""
    dtype_ = np.dtype(dtype)
    raw = np.random.default_rng(seed).integers(0, 256, rows * cols * bands * dtype_.itemsize)
    return raw.astype(np.uint8).view(dtype_).reshape(rows, cols, bands).transpose(2, 0, 1)


def _numpy_copy(dest: np.ndarray, source: np.ndarray) -> bytes:
    expected = np.empty_like(dest)
    expected[...] = source
    return expected.tobytes()


@pytest.fixture(autouse=True)
def any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small arrays split by OpenCV too (NumPy copies them quicker: a speed choice)."""
    monkeypatch.setattr(deinterleave, "SPLIT_MIN_BYTES", 0)


def test_opencv_is_found() -> None:
    assert deinterleave._opencv() is cv2


def test_small_arrays_are_copied_by_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deinterleave, "SPLIT_MIN_BYTES", 32 << 10)
    small = _interleaved(40, 90, 3, "u1", seed=8)  # 10,800 bytes
    large = _interleaved(100, 120, 3, "u1", seed=9)  # 36,000 bytes
    assert small.nbytes < deinterleave.SPLIT_MIN_BYTES <= large.nbytes
    for source, by_opencv in ((small, False), (large, True)):
        dest = np.empty(source.shape, dtype=source.dtype)
        assert deinterleave.copy_planes(dest, source) is by_opencv
        assert dest.tobytes() == _numpy_copy(dest, source)


@pytest.mark.parametrize("bands", [2, 3, 4, 7])
@pytest.mark.parametrize("dtype", ["u1", "<u2", ">u2", "<i2", "<i4", ">i4", "<f4", ">f4"])
def test_split_writes_numpys_bits(dtype: str, bands: int) -> None:
    source = _interleaved(13, 29, bands, dtype, seed=bands)
    dest = np.empty(source.shape, dtype=source.dtype)
    assert deinterleave.copy_planes(dest, source)  # split by OpenCV
    assert dest.tobytes() == _numpy_copy(dest, source)


def test_split_into_rows_of_a_larger_output() -> None:
    """A piece of rows of the output: each band's rows are one contiguous plane."""
    source = _interleaved(5, 31, 3, "u1", seed=1)
    out = np.zeros((3, 20, 31), dtype=np.uint8)
    assert deinterleave.copy_planes(out[:, 7:12], source)
    expected = np.zeros_like(out)
    expected[:, 7:12] = source
    assert out.tobytes() == expected.tobytes()


@pytest.mark.parametrize("dtype", ["u1", ">u2", "<f4"])
def test_planes_with_gaps_between_rows_split_through_a_new_array(dtype: str) -> None:
    """A tile's place in a larger output: split into a band-first array, then copied;
    the rest of the output untouched."""
    source = _interleaved(7, 11, 3, dtype, seed=6)
    out = np.zeros((3, 20, 30), dtype=source.dtype)
    dest = out[:, 5:12, 13:24]
    assert deinterleave.copy_planes(dest, source)
    expected = np.zeros_like(out)
    expected[:, 5:12, 13:24] = source
    assert out.tobytes() == expected.tobytes()


def _refused_layouts() -> list[tuple[str, np.ndarray, np.ndarray]]:
    interleaved = _interleaved(6, 10, 3, "u1", seed=2)
    return [
        ("one band", np.zeros((1, 6, 10), np.uint8), _interleaved(6, 10, 1, "u1", seed=3)),
        ("eight-byte samples", np.zeros((3, 6, 10), "f8"), _interleaved(6, 10, 3, "f8", seed=4)),
        ("planar source", np.zeros((3, 6, 10), np.uint8), np.ascontiguousarray(interleaved)),
        ("every other pixel", np.zeros((3, 6, 5), np.uint8), interleaved[:, :, ::2]),
        ("other type", np.zeros((3, 6, 10), np.int8), interleaved),
        ("other shape", np.zeros((3, 5, 10), np.uint8), interleaved),
    ]


@pytest.mark.parametrize(
    ("dest", "source"),
    [layout[1:] for layout in _refused_layouts()],
    ids=[layout[0] for layout in _refused_layouts()],
)
def test_layouts_opencv_does_not_take_are_copied_by_numpy(
    dest: np.ndarray, source: np.ndarray
) -> None:
    if dest.shape != source.shape:
        # Nothing written by OpenCV: NumPy's copy refuses the shape, as ``dest[...] =
        # source`` does.
        before = dest.copy()
        with pytest.raises(ValueError, match="broadcast"):
            deinterleave.copy_planes(dest, source)
        assert dest.tobytes() == before.tobytes()
        return
    expected = _numpy_copy(dest, source)
    assert not deinterleave.copy_planes(dest, source)
    assert dest.tobytes() == expected


def test_without_opencv_numpy_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deinterleave, "_opencv", lambda: None)
    source = _interleaved(9, 17, 3, ">u2", seed=5)
    dest = np.empty(source.shape, dtype=source.dtype)
    assert not deinterleave.copy_planes(dest, source)
    assert dest.tobytes() == _numpy_copy(dest, source)
