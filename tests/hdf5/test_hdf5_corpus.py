"""Every HDF5/netCDF-4 file of the real-file corpus, read back through the virtual store.

For each file: every dataset equals h5py's raw read or was refused for one of the
issue's reasons (each refusal reported as a warning); the decoded and raw xarray views
equal h5netcdf's wherever h5netcdf opens the file. The netCDF-3 files must be refused
as not HDF5. Counts are printed (``pytest -s``) per file and in total.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from tests._hdf5_checks import Report, check_netcdf, check_raw, parse, registry, url_of
from virtualizarr_fill.errors import NotHDF5Error
from virtualizarr_fill.hdf5 import HDF5Parser

pytestmark = pytest.mark.corpus

_CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _signature(path: Path) -> str:
    with open(path, "rb") as file:
        head = file.read(8)
        if head[:3] == b"CDF":
            return "netcdf3"
        offset = 512
        size = path.stat().st_size
        while True:
            if head == _HDF5_SIGNATURE:
                return "hdf5"
            if offset + 8 > size:
                return "other"
            file.seek(offset)
            head = file.read(8)
            offset *= 2


def _corpus_files(kind: str) -> list[str]:
    manifest = _CORPUS / "MANIFEST.tsv"
    if not manifest.is_file():
        return ["<corpus missing>"]
    with open(manifest, newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    names = [row["corpus_path"] for row in rows]
    return [n for n in names if _signature(_CORPUS / n) == kind]


TOTALS: Counter[str] = Counter()
REFUSALS: Counter[str] = Counter()


@pytest.mark.parametrize("name", _corpus_files("hdf5"))
def test_corpus_file_reads_back_exactly(corpus_dir: Path, name: str) -> None:
    path = corpus_dir / name
    parsed = parse(path)
    report = Report()
    report.merge(check_raw(path, parsed))
    report.merge(check_netcdf(path, parsed))
    TOTALS.update(report.counts)
    TOTALS["files"] += 1
    REFUSALS.update(report.refusals)
    print(f"\n{name}: {dict(report.counts)} refused={dict(report.refusals)}")
    assert not report.problems, "\n".join(report.problems)


@pytest.mark.parametrize("name", _corpus_files("netcdf3"))
def test_corpus_netcdf3_is_refused_as_not_hdf5(corpus_dir: Path, name: str) -> None:
    with pytest.raises(NotHDF5Error, match="netCDF-3"):
        HDF5Parser()(url_of(corpus_dir / name), registry())
    TOTALS["netCDF-3 refused"] += 1


def test_corpus_totals(corpus_dir: Path) -> None:
    """Print the totals of the per-file tests above (run in the same session)."""
    print(f"\nHDF5 corpus totals: {dict(TOTALS)}\nrefusals by kind: {dict(REFUSALS)}")
    if TOTALS["files"]:
        assert TOTALS["equal"] > 0
