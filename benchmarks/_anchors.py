"""Pieces of ``bench_anchors.py``: the tools, where files are read from, and the measures.

* :data:`TOOLS`: our parsers and the anchors (virtual-tiff, VirtualiZarr's HDFParser,
  async-hdf5 through its VirtualiZarr entry point, kerchunk), each as a function of one
  :class:`Target`, named as in ``conformance.py`` so its correctness verdicts apply.
* :class:`LocalLeg` / :class:`S3Leg`: the same files read from disk or from moto's S3
  server on loopback, through obstore's ``LocalStore`` / ``S3Store`` (and s3fs for
  kerchunk) configured as a user would.
* :func:`measure_parse`: median parse time (runs interleaved across tools), requests and
  bytes of one parse.
* :func:`measure_read`: every array our parser exposes read through the ManifestStore
  with zarr, against the native reader (tifffile ``page.asarray()``, h5py ``ds[()]``).
* :func:`measure_combine`: ``xr.combine_nested`` of N virtual datasets from each tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _counting_store import CountingStore
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

import virtualizarr_fill
from virtualizarr_fill.reads import PIPELINE_PATH

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CORPUS = REPO.parent / "shared" / "corpus"
for _path in (str(HERE), str(REPO)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from conformance import worker  # noqa: E402

OURS = "virtualizarr-fill"
BUCKET = "bench-anchors"


# --------------------------------------------------------------------------- files


@dataclass(frozen=True)
class BenchFile:
    """One input: ``label`` names it in tables (corpus-relative path, or ``generated/...``)."""

    label: str
    path: Path
    kind: str  # "tiff" or "hdf5"

    @property
    def generated(self) -> bool:
        return self.label.startswith("generated/")


def generated_files(workdir: Path) -> list[BenchFile]:
    """The generated inputs of ``_inputs.py``, written once into ``workdir``."""
    import _inputs

    files = [BenchFile(f"generated/{p.name}", p, "tiff") for p in _inputs.make_tiff_inputs(workdir)]
    files += [
        BenchFile(f"generated/{p.name}", p, "hdf5") for p in _inputs.make_hdf5_inputs(workdir)
    ]
    return files


def corpus_sample(limit: int | None, corpus: Path = CORPUS) -> list[BenchFile]:
    """Corpus TIFF and HDF5 files; with ``limit``, at most that many of each kind, spread
    evenly over the sorted list (so every source of the corpus is represented)."""
    from conformance import conformance

    by_kind: dict[str, list[BenchFile]] = {"tiff": [], "hdf5": []}
    for path, rel, kind in conformance.corpus_files(corpus):
        if kind in by_kind:
            by_kind[kind].append(BenchFile(rel, Path(path), kind))
    out: list[BenchFile] = []
    for files in by_kind.values():
        out += evenly(files, limit)
    return out


def evenly(items: list[BenchFile], limit: int | None) -> list[BenchFile]:
    if limit is None or limit >= len(items):
        return list(items)
    if limit <= 0:
        return []
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


# ---------------------------------------------------------------------------- legs


@dataclass
class Target:
    """Where one parse reads ``file`` from, with a fresh request counter."""

    file: BenchFile
    url: str  # what obstore-based tools get (file:///... or s3://bucket/key)
    key: str  # the object's path inside ``store``
    store: Any  # a CountingStore, except where reads need obstore's own classes
    registry: ObjectStoreRegistry
    fsspec_url: str  # what kerchunk gets (a local path or s3://bucket/key)
    storage_options: dict[str, Any] | None


class LocalLeg:
    """Files on disk through obstore's ``LocalStore`` (and plain files for kerchunk)."""

    name = "local"
    counts_at_server = False

    def __init__(self, count: bool = True) -> None:
        self.store = LocalStore()
        self.count = count

    def target(self, file: BenchFile) -> Target:
        counting = CountingStore(self.store) if self.count else self.store
        path = str(file.path)
        return Target(
            file=file,
            url="file://" + path,
            key=path.lstrip("/"),
            store=counting,
            registry=ObjectStoreRegistry({"file://": counting}),
            fsspec_url=path,
            storage_options=None,
        )

    def job(self, file: BenchFile) -> dict[str, Any]:
        """What a parse worker needs to build the same target."""
        return {"leg": "local"}

    def server_counts(self) -> tuple[int, int]:
        return 0, 0


class RequestCounter:
    """WSGI middleware counting requests and response-body bytes a server answers.

    Counting at the server is the one way to count fsspec/s3fs (kerchunk) requests the
    same way as obstore's; moto has no request statistics of its own.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests = 0
        self.bytes = 0
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        with self._lock:
            self.requests += 1
        result = self.app(environ, start_response)
        try:
            for chunk in result:
                with self._lock:
                    self.bytes += len(chunk)
                yield chunk
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()


class S3Leg:
    """The same files uploaded to moto's S3 server on loopback.

    obstore-based tools get an ``S3Store`` configured as for AWS plus the endpoint (one
    store per process, as a user indexing many files keeps one); kerchunk gets s3fs with
    the same endpoint and credentials through ``storage_options``. The server runs in a
    process of its own (see :func:`_serve_s3`), so it does not compete for the GIL of
    the process being timed; ``conn`` reaches it for request counts.
    """

    name = "S3"
    counts_at_server = True

    def __init__(self, port: int, conn: Any = None) -> None:
        from fixtures.servers import ACCESS_KEY, REGION, SECRET_KEY, S3Server

        # Only the client side of S3Server is used (store settings, bucket, uploads):
        # the server runs in another process, on ``port``.
        self.server = S3Server()
        self.server.port = port
        self.conn = conn
        self.store = self.server.store(BUCKET)
        self.storage_options = {
            "key": ACCESS_KEY,
            "secret": SECRET_KEY,
            "client_kwargs": {"endpoint_url": self.server.endpoint, "region_name": REGION},
        }
        self.keys: dict[Path, str] = {}

    def upload(self, files: list[BenchFile]) -> None:
        for file in files:
            if file.path not in self.keys:
                key = file.label.replace(" ", "_")
                self.server.upload(BUCKET, key, file.path)
                self.keys[file.path] = key

    def target(self, file: BenchFile) -> Target:
        counting = CountingStore(self.store)
        key = self.keys[file.path]
        url = f"s3://{BUCKET}/{key}"
        return Target(
            file=file,
            url=url,
            key=key,
            store=counting,
            registry=ObjectStoreRegistry({f"s3://{BUCKET}": counting}),
            fsspec_url=url,
            storage_options=self.storage_options,
        )

    def job(self, file: BenchFile) -> dict[str, Any]:
        return {"leg": "S3", "port": self.server.port, "key": self.keys[file.path]}

    def server_counts(self) -> tuple[int, int]:
        self.conn.send("counts")
        if not self.conn.poll(60):
            raise RuntimeError("the S3 server process stopped answering")
        requests, nbytes = self.conn.recv()
        return int(requests), int(nbytes)


def _serve_s3(conn: Any) -> None:
    """Child process: fixtures/servers.py's moto server with a :class:`RequestCounter` in
    front of it, answering "counts" over ``conn`` until told to stop or ``conn`` closes."""
    from fixtures.servers import running_s3

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # it logs every request
    with running_s3() as server:
        # S3Server wraps moto's ThreadedMotoServer, whose werkzeug server serves ``app``.
        wsgi_server: Any = server._server._server
        counter = RequestCounter(wsgi_server.app)
        wsgi_server.app = counter
        conn.send(server.port)
        while True:
            try:
                message = conn.recv()
            except EOFError:
                return
            if message != "counts":
                return
            conn.send((counter.requests, counter.bytes))


@contextlib.contextmanager
def s3_leg() -> Iterator[S3Leg]:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_serve_s3, args=(child,), daemon=True)
    process.start()
    child.close()
    try:
        if not parent.poll(60):
            raise RuntimeError("the S3 server process did not start")
        leg = S3Leg(parent.recv(), parent)
        leg.server.create_bucket(BUCKET)
        yield leg
    finally:
        with contextlib.suppress(OSError):
            parent.send("stop")
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join()


def s3fs_available() -> tuple[bool, str]:
    try:
        import s3fs
    except ImportError as error:
        return False, worker.error_line(error)
    return True, f"s3fs {s3fs.__version__}"


# --------------------------------------------------------------------------- tools


def _ours_tiff(t: Target) -> Any:
    from virtualizarr_fill.tiff import TIFFParser

    # Every image, like virtual-tiff's default and conformance.py's check.
    return TIFFParser(layout="tree")(t.url, t.registry)


def _virtual_tiff(t: Target) -> Any:
    from virtual_tiff import VirtualTIFF

    return VirtualTIFF()(t.url, t.registry)


# The read and combine measures need the ManifestStore each parse returns.
def _ours_hdf5(t: Target) -> Any:
    from virtualizarr_fill.hdf5 import HDF5Parser

    return HDF5Parser()(t.url, t.registry)


def _virtualizarr_hdf(t: Target) -> Any:
    from virtualizarr.parsers import HDFParser

    return HDFParser()(t.url, t.registry)


def _async_hdf5(t: Target) -> Any:
    from async_hdf5.virtualizarr import open_virtual_hdf5

    return asyncio.run(open_virtual_hdf5(t.key, store=t.store, url=t.url, registry=t.registry))


def _kerchunk(t: Target) -> Any:
    if t.file.kind == "tiff":
        from kerchunk.tiff import tiff_to_zarr

        return tiff_to_zarr(t.fsspec_url, remote_options=t.storage_options)
    from kerchunk.hdf import SingleHdf5ToZarr

    translator = SingleHdf5ToZarr(t.fsspec_url, storage_options=t.storage_options)
    try:
        return translator.translate()
    finally:
        translator.close()


@dataclass(frozen=True)
class Tool:
    name: str  # as in conformance.py
    kinds: frozenset[str]
    parse: Callable[[Target], Any]
    obstore: bool  # reads through the registry's store (CountingStore counts it)


TOOLS: dict[str, Tool] = {
    OURS: Tool(
        OURS,
        frozenset({"tiff", "hdf5"}),
        lambda t: (_ours_tiff if t.file.kind == "tiff" else _ours_hdf5)(t),
        True,
    ),
    "virtual-tiff": Tool("virtual-tiff", frozenset({"tiff"}), _virtual_tiff, True),
    "virtualizarr-hdf": Tool("virtualizarr-hdf", frozenset({"hdf5"}), _virtualizarr_hdf, True),
    "async-hdf5": Tool("async-hdf5", frozenset({"hdf5"}), _async_hdf5, True),
    "kerchunk": Tool("kerchunk", frozenset({"tiff", "hdf5"}), _kerchunk, False),
}
ANCHORS = [name for name in TOOLS if name != OURS]


def tools_for(kind: str) -> list[str]:
    return [name for name, tool in TOOLS.items() if kind in tool.kinds]


# ------------------------------------------------------------------------ parse time


@dataclass
class ParseResult:
    seconds: float | None = None  # median over the repeats
    requests: int | None = None
    nbytes: int | None = None
    store_requests: int | None = None  # CountingStore's count, where the tool uses obstore
    error: str = ""  # the first (counted) run raised this
    flaky: int = 0  # a timed run raised, timed out or crashed although the first did not
    times: list[float] = field(default_factory=list)


def _parse_once(tool: Tool, leg: Any, file: BenchFile) -> tuple[float | None, Target, str]:
    target = leg.target(file)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tool.parse(target)
    except Exception as error:
        return None, target, worker.error_line(error)
    return time.perf_counter() - start, target, ""


def _parse_worker_main(conn: Any, tool_name: str) -> None:
    """Child process bound to one tool: parse the files it is sent, timing each parse
    here (so process hand-offs are not timed), until ``conn`` closes."""
    import os

    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    tool = TOOLS[tool_name]
    local = LocalLeg()
    remote: dict[int, S3Leg] = {}
    conn.send("ready")
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        file = BenchFile(job["label"], Path(job["path"]), job["kind"])
        leg: Any = local
        if job["leg"] == "S3":
            leg = remote.get(job["port"]) or remote.setdefault(job["port"], S3Leg(job["port"]))
            leg.keys[file.path] = job["key"]
        elapsed, target, error = _parse_once(tool, leg, file)
        stats = target.store.stats if isinstance(target.store, CountingStore) else None
        conn.send(
            {
                "seconds": elapsed,
                "error": error,
                "requests": stats.requests if stats else None,
                "bytes": stats.bytes_read if stats else None,
            }
        )


class ToolProcess:
    """A worker process for one tool; a parse that exceeds ``timeout`` (a hang inside a
    tool, as kerchunk after async-hdf5 errors has shown) or kills the process costs that
    parse only: the process is replaced."""

    def __init__(self, tool: str, timeout: float) -> None:
        import multiprocessing

        self.tool = tool
        self.timeout = timeout
        self.context = multiprocessing.get_context("spawn")
        self.process: Any = None
        self.conn: Any = None

    def _start(self) -> None:
        parent, child = self.context.Pipe()
        self.process = self.context.Process(
            target=_parse_worker_main, args=(child, self.tool), daemon=True
        )
        self.process.start()
        child.close()
        if not parent.poll(300):
            self.stop()
            raise RuntimeError(f"the parse worker for {self.tool} did not start")
        parent.recv()
        self.conn = parent

    def run(self, file: BenchFile, job: dict[str, Any]) -> dict[str, Any]:
        if self.process is None:
            self._start()
        self.conn.send({"label": file.label, "path": str(file.path), "kind": file.kind, **job})
        if self.conn.poll(self.timeout):
            try:
                result: dict[str, Any] = self.conn.recv()
                return result
            except (EOFError, OSError):
                self.stop()
                return {"seconds": None, "error": "crash: the worker process died"}
        self.stop()
        return {"seconds": None, "error": f"timeout: no result after {self.timeout:.0f} s"}

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.is_alive():
            with contextlib.suppress(OSError):
                self.conn.send(None)
            self.process.join(2)
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.process = self.conn = None


@contextlib.contextmanager
def tool_processes(timeout: float) -> Iterator[dict[str, ToolProcess]]:
    processes = {name: ToolProcess(name, timeout) for name in TOOLS}
    try:
        yield processes
    finally:
        for process in processes.values():
            process.stop()


def measure_parse(
    file: BenchFile,
    leg: Any,
    tools: list[str],
    repeat: int,
    processes: dict[str, ToolProcess],
) -> dict[str, ParseResult]:
    """Every tool on one file, each in its own worker process: a counted first run, then
    ``repeat`` timed runs interleaved (the order rotates each round, so machine load and
    warm caches hit all alike)."""
    results: dict[str, ParseResult] = {}
    job = leg.job(file)
    for name in tools:
        before = leg.server_counts()
        first = processes[name].run(file, job)
        after = leg.server_counts()
        result = ParseResult(error=first["error"])
        if TOOLS[name].obstore:
            result.store_requests = first["requests"]
        if leg.counts_at_server:
            result.requests, result.nbytes = after[0] - before[0], after[1] - before[1]
        elif TOOLS[name].obstore:
            result.requests, result.nbytes = first["requests"], first["bytes"]
        results[name] = result
    live = [name for name in tools if not results[name].error]
    timed = list(live)
    for round_ in range(repeat):
        shift = round_ % max(1, len(timed))
        for name in timed[shift:] + timed[:shift]:
            elapsed = processes[name].run(file, job)["seconds"]
            if elapsed is None:
                # Its output is not to be relied on: no more runs (a hang costs a timeout).
                results[name].flaky += 1
                timed.remove(name)
            else:
                results[name].times.append(elapsed)
    for name in live:
        if results[name].times:
            results[name].seconds = statistics.median(results[name].times)
    return results


# ------------------------------------------------------------------------ read speed


#: zarr's codec pipelines: the default, the opt-in synchronous one (which reads a
#: ManifestStore through ``FileManifestStore.get_sync``), and ours, which reads a whole
#: batch of chunks from the manifest at once, read inside
#: ``virtualizarr_fill.use_manifest_pipeline()``.
PIPELINES = {
    "batched": "zarr.core.codec_pipeline.BatchedCodecPipeline",
    "fused": "zarr.core.codec_pipeline.FusedCodecPipeline",
    "manifest": PIPELINE_PATH,
}


def reading_with(pipeline: str) -> Any:
    """The context a read with ``pipeline`` (a key of :data:`PIPELINES`) runs in."""
    import zarr

    if pipeline == "manifest":
        return virtualizarr_fill.use_manifest_pipeline()
    return zarr.config.set({"codec_pipeline.path": PIPELINES[pipeline]})


@dataclass
class ReadResult:
    arrays: int = 0
    nbytes: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # "native" and each pipeline
    equal: bool = True  # every array read equal to the native read, bit for bit
    error: str = ""

    def ratio(self, pipeline: str) -> float | None:
        ours, native = self.seconds.get(pipeline), self.seconds.get("native")
        return ours / native if ours and native else None


def _pairs(file: BenchFile, root: Any) -> list[tuple[str, Any]]:
    """(zarr path of an array we expose, native key) for every array with a native read."""
    import h5py
    import tifffile

    tool = worker.TOOLS[OURS]
    pairs: list[tuple[str, Any]] = []
    if file.kind == "tiff":
        for name, array, attrs in worker._zarr_arrays(root):
            key = worker._tiff_key(tool, name, array, attrs)
            if key is not None:
                pairs.append((name, key))
        with tifffile.TiffFile(file.path) as tif:
            return [(n, k) for n, k in pairs if _readable_tiff(tif, k)]
    with h5py.File(file.path, "r") as f:
        for name, array, _ in worker._zarr_arrays(root):
            native = worker._netcdf_variable_path(f, name)
            obj = f.get(native)
            if not isinstance(obj, h5py.Dataset):
                continue
            with contextlib.suppress(Exception):
                value, _why = worker._native_hdf5_value(f, native)
                if value is not None and array.nbytes <= worker.MAX_COMPARE_BYTES:
                    pairs.append((name, native))
    return pairs


def _readable_tiff(tif: Any, key: Any) -> bool:
    try:
        worker._tiff_image(tif, key).asarray()
    except Exception:
        return False
    return True


def _read_ours(store: Any, names: list[str]) -> list[np.ndarray]:
    import zarr

    root: Any = zarr.open_group(store, mode="r", zarr_format=3)
    return [np.asarray(root[name][...]) for name in names]


def _read_native(file: BenchFile, keys: list[Any]) -> list[np.ndarray]:
    if file.kind == "tiff":
        import tifffile

        with tifffile.TiffFile(file.path) as tif:
            return [np.asarray(worker._tiff_image(tif, key).asarray()) for key in keys]
    import h5py

    with h5py.File(file.path, "r") as f:
        return [np.asarray(f[key][()]) for key in keys]


#: Most rounds of the native reader and the manifest pipeline read after the first
#: ``repeat`` rounds of every side (:func:`measure_read`).
PAIRED_MAX_ROUNDS = 200


def measure_read(file: BenchFile, repeat: int, paired_seconds: float = 0.0) -> ReadResult:
    """Read every array we expose that the native reader also reads, each way.

    Timed: opening the virtual group and reading each array through zarr from the
    ManifestStore (parsed beforehand, untimed), with each of zarr's codec
    :data:`PIPELINES`, against opening the file with tifffile/h5py and reading the same
    arrays; rounds interleaved. An untimed first round checks every way reads the same
    values as the native reader, bit for bit.

    After ``repeat`` rounds of every side, the native reader and the manifest pipeline
    (the pair the read target is about) take further interleaved rounds until each has
    read for ``paired_seconds`` (at most :data:`PAIRED_MAX_ROUNDS` rounds): a median of
    three reads of a millisecond, each after zarr's other pipelines read the same file
    for up to a hundred times longer, is mostly this machine's noise. Medians are over
    every round of a side.
    """
    import zarr

    result = ReadResult()
    sides = ["native", *PIPELINES]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # No CountingStore: the fused pipeline's synchronous reads call obstore's
            # functions, which take only obstore's own store classes.
            store = TOOLS[OURS].parse(LocalLeg(count=False).target(file))
            pairs = _pairs(file, zarr.open_group(store, mode="r", zarr_format=3))
            if not pairs:
                result.error = "no arrays both read"
                return result
            names, keys = [n for n, _ in pairs], [k for _, k in pairs]

            def read(side: str) -> list[np.ndarray]:
                if side == "native":
                    return _read_native(file, keys)
                with reading_with(side):
                    return _read_ours(store, names)

            native = read("native")
            result.arrays = len(pairs)
            result.nbytes = sum(a.nbytes for a in native)
            match = worker._match_tiff if file.kind == "tiff" else worker.compare
            for side in PIPELINES:
                for got, ref in zip(read(side), native, strict=True):
                    if match(ref, got)[0] != worker.EXACT:
                        result.equal = False
            del native
            times: dict[str, list[float]] = {side: [] for side in sides}
            for round_ in range(repeat):
                shift = round_ % len(sides)
                for side in sides[shift:] + sides[:shift]:
                    start = time.perf_counter()
                    read(side)
                    times[side].append(time.perf_counter() - start)
            pair = ["native", "manifest"]
            for round_ in range(PAIRED_MAX_ROUNDS):
                if min(sum(times[side]) for side in pair) >= paired_seconds:
                    break
                for side in pair if round_ % 2 else pair[::-1]:
                    start = time.perf_counter()
                    read(side)
                    times[side].append(time.perf_counter() - start)
    except Exception as error:
        result.error = worker.error_line(error)
        return result
    result.seconds = {side: statistics.median(values) for side, values in times.items()}
    return result


# --------------------------------------------------------------------------- combine


def _virtual_dataset(tool: str, file: BenchFile) -> Any:
    """The virtual dataset a user of ``tool`` gets for ``file`` (first image for TIFF)."""
    from virtualizarr import open_virtual_dataset

    target = LocalLeg(count=False).target(file)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if tool == OURS:
            from virtualizarr_fill.hdf5 import HDF5Parser
            from virtualizarr_fill.tiff import TIFFParser

            parser: Any = TIFFParser() if file.kind == "tiff" else HDF5Parser()
        elif tool == "virtual-tiff":
            from virtual_tiff import VirtualTIFF

            parser = VirtualTIFF(ifd=0)
        elif tool == "virtualizarr-hdf":
            from virtualizarr.parsers import HDFParser

            parser = HDFParser()
        elif tool == "async-hdf5":
            # async-hdf5 has no Parser class; its entry point returns a ManifestStore.
            return _async_hdf5(target).to_virtual_dataset()
        else:
            raise ValueError(f"{tool} does not produce virtual datasets")
        return open_virtual_dataset(target.url, registry=target.registry, parser=parser)


@dataclass
class CombineResult:
    tool: str
    seconds: float | None = None
    sizes: dict[str, int] = field(default_factory=dict)
    error: str = ""


def measure_combine(
    file: BenchFile, tools: list[str], count: int, repeat: int
) -> dict[str, CombineResult]:
    """Median time of ``xr.combine_nested`` of ``count`` virtual datasets of ``file`` along
    a new dimension, per tool (runs interleaved), with the options VirtualiZarr's docs
    recommend for virtual datasets."""
    import xarray as xr

    results = {name: CombineResult(name) for name in tools}
    datasets: dict[str, Any] = {}
    for name in tools:
        try:
            datasets[name] = _virtual_dataset(name, file)
        except Exception as error:
            results[name].error = worker.error_line(error)

    def combine(ds: Any) -> Any:
        return xr.combine_nested(
            [ds.copy() for _ in range(count)],
            concat_dim="t",
            coords="minimal",
            compat="override",
            combine_attrs="override",
            data_vars="all",
            join="override",
        )

    times: dict[str, list[float]] = {name: [] for name in datasets}
    for name, ds in list(datasets.items()):
        try:
            combined = combine(ds)  # warm-up, and the combined sizes
            results[name].sizes = {str(k): int(v) for k, v in combined.sizes.items()}
        except Exception as error:
            results[name].error = worker.error_line(error)
            del datasets[name]
    for round_ in range(repeat):
        names = list(datasets)
        shift = round_ % max(1, len(names))
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            combine(datasets[name])
            times[name].append(time.perf_counter() - start)
    for name in datasets:
        results[name].seconds = statistics.median(times[name])
    return results


def constant_manifest_store_str() -> None:
    """See ``conformance.worker._constant_manifest_store_str`` (zarr formats the store on
    every array open; VirtualiZarr's ``__str__`` renders the whole hierarchy)."""
    worker._constant_manifest_store_str()
