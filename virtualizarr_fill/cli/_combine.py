"""How ``build`` combines files: the mode its arguments choose, the files' parts collected
as workers send them, and the combined virtual dataset (:mod:`virtualizarr_fill.assemble`
does the combining; this module maps its refusals to one-line command errors).

Modes:

* ``single``: one file, no ``--concat-dim``: its dataset as it is;
* ``series``: along an existing dimension (``--concat-dim``, or ``time`` with
  ``--time-from``), the files ordered by their coordinate, overlaps and gaps refused;
* ``stack``: along a new dimension (``--concat-dim DIM --new-dim``), in the order given;
* ``mosaic``: GeoTIFF tiles placed by their georeferencing along ``y`` and ``x``
  (``--mosaic``, or several files without ``--concat-dim`` whose first is georeferenced).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from virtualizarr_fill.cli._errors import EXIT_BAD_INPUT, EXIT_USAGE, CliError
from virtualizarr_fill.cli._inputs import display
from virtualizarr_fill.errors import VirtualizarrFillError

if TYPE_CHECKING:
    import xarray as xr

    from virtualizarr_fill.assemble import Collector, FilePart

__all__ = ["Combination", "Plan", "check_append", "combining"]


@dataclass(frozen=True)
class Plan:
    """How the files combine: ``mode`` (see the module docstring; ``auto`` until the
    first file says whether it is a mosaic tile) and the dimension. ``scenes``: a time
    stack of scenes (``--time-from``), whose acquisitions are irregular by design (a
    cloudy scene left out is not a gap), so only overlaps are refused."""

    mode: str
    dim: str | None = None
    allow_gaps: bool = False
    on_fill_conflict: str = "error"
    scenes: bool = False
    #: Which tile a mosaic's overlap takes (``--overlap``), None to refuse overlaps.
    overlap: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace, files: int) -> Plan:
        options: dict[str, Any] = {
            "allow_gaps": args.allow_gaps,
            "on_fill_conflict": args.on_fill_conflict,
            "scenes": getattr(args, "time_from", None) is not None,
            "overlap": getattr(args, "overlap", None),
        }
        if options["overlap"] and args.concat_dim:
            raise CliError(
                "--overlap says which tile a mosaic's overlap takes; drop it with --concat-dim",
                EXIT_USAGE,
            )
        if args.mosaic:
            if args.concat_dim or args.new_dim:
                raise CliError("--mosaic places tiles along y and x; drop --concat-dim", EXIT_USAGE)
            return cls("mosaic", **options)
        if args.concat_dim:
            return cls("stack" if args.new_dim else "series", args.concat_dim, **options)
        if args.new_dim:
            raise CliError("--new-dim needs --concat-dim DIM (the new dimension)", EXIT_USAGE)
        return cls("single" if files == 1 else "auto", **options)

    @property
    def gaps_allowed(self) -> bool:
        """Whether a series may leave gaps: ``--allow-gaps``, or a stack of scenes."""
        return self.allow_gaps or self.scenes

    @property
    def dims(self) -> list[str]:
        from virtualizarr_fill.assemble.mosaic import X, Y

        return [Y, X] if self.mode == "mosaic" else [self.dim] if self.dim else []

    def resolved(self, first: FilePart) -> Plan:
        """The plan once the first file is known: ``auto`` becomes ``mosaic`` for
        georeferenced images, and is refused otherwise."""
        from virtualizarr_fill.assemble.mosaic import X, Y

        if self.mode != "auto":
            return self
        if X in first.coords and Y in first.coords:
            return dataclasses.replace(self, mode="mosaic")
        raise CliError(
            f"{display(first.url)} is not a georeferenced image, so the files cannot be "
            "placed as a mosaic: say how to combine them with --concat-dim DIM (or "
            "--time-from)",
            EXIT_USAGE,
        )


@contextlib.contextmanager
def combining(dim_label: str) -> Iterator[None]:
    """Map the refusals of a combination to one-line command errors."""
    from virtualizarr_fill.fill.combine import FillConflictError

    try:
        yield
    except CliError:
        raise
    except FillConflictError as error:
        raise CliError(
            f"the files cannot be combined {dim_label}: {error.problem}. To combine anyway, "
            "choose a rule: --on-fill-conflict use_first or --on-fill-conflict drop",
            EXIT_BAD_INPUT,
        ) from None
    except VirtualizarrFillError as error:
        raise CliError(
            f"the files cannot be combined {dim_label}: {error}", EXIT_BAD_INPUT
        ) from None
    except ValueError as error:
        raise CliError(
            f"the files cannot be combined {dim_label}: {error}", EXIT_BAD_INPUT
        ) from None
    except NotImplementedError as error:
        # xarray asks virtual arrays for what only loaded data can do (e.g. casting
        # when the files' data types differ).
        raise CliError(
            f"the files cannot be combined {dim_label}: they differ in a way virtual "
            f"references cannot reconcile, such as data types ({error})",
            EXIT_BAD_INPUT,
        ) from None


class Combination:
    """The parts of the files ``build`` combines, collected in any order and combined
    in the order the plan says (input order where the files have no coordinate)."""

    def __init__(self, plan: Plan, urls: Sequence[str]) -> None:
        self.plan = plan
        self._order = {url: i for i, url in enumerate(urls)}
        self._collector: Collector | None = None

    @property
    def label(self) -> str:
        return "as a mosaic" if self.plan.mode == "mosaic" else f"along {self.plan.dim!r}"

    def add(self, part: FilePart) -> None:
        """Check one file's part against the first and keep what the result needs."""
        from virtualizarr_fill.assemble import Collector

        if self._collector is None:
            self.plan = self.plan.resolved(part)
            self._check_dimension(part)
            self._collector = Collector(
                self.plan.dims, new_dim=self.plan.mode == "stack", decode_times=None
            )
        with combining(self.label):
            self._collector.add_part(part)

    def merge(self, collector: Collector) -> None:
        """Add the files of a collector of this combination (files collected elsewhere,
        after the first)."""
        assert self._collector is not None, "the first file is added first"
        self._collector.merge(collector)

    def _check_dimension(self, first: FilePart) -> None:
        dim = self.plan.dim
        if dim is None:
            return
        dims = first.sizes()
        if self.plan.mode == "stack" and dim in dims:
            raise CliError(
                f"{display(first.url)}: {dim!r} is already a dimension; drop --new-dim to "
                "concatenate along it",
                EXIT_USAGE,
            )
        if self.plan.mode == "series" and dim not in dims:
            available = ", ".join(dims) or "none"
            raise CliError(
                f"{display(first.url)}: no dimension {dim!r} (dimensions: {available}); "
                "use --new-dim to stack the files along a new dimension",
                EXIT_USAGE,
            )

    @property
    def files(self) -> int:
        return 0 if self._collector is None else len(self._collector.parts)

    def parts(self) -> list[FilePart]:
        """The parts, in input order."""
        assert self._collector is not None
        return sorted(self._collector.parts, key=lambda p: self._order.get(p.url, 0))

    def result(self) -> xr.Dataset:
        """The combined virtual dataset."""
        from virtualizarr_fill.assemble import fill_rule
        from virtualizarr_fill.assemble.mosaic import combine_tiles, tile_grid
        from virtualizarr_fill.assemble.series import combine_parts, order_parts

        if self._collector is None:
            raise CliError("no files to combine", EXIT_BAD_INPUT)
        with combining(self.label):
            self._collector.check_tiles()
        template = self._collector.template()
        if self.plan.mode == "single":
            return template
        parts = self.parts()
        plan = self.plan
        with combining(self.label), fill_rule(plan.on_fill_conflict):  # type: ignore[arg-type]
            if plan.mode == "mosaic":
                from virtualizarr_fill.io.registries import registry_for

                grid = tile_grid(parts, allow_gaps=plan.allow_gaps, overlap=plan.overlap)  # type: ignore[arg-type]
                # also without overlaps: masked tiles are read to compare with nodata
                registry = registry_for([p.url for p in parts])
                return combine_tiles(template, grid, registry)
            assert plan.dim is not None
            if plan.mode == "series":
                parts = order_parts(parts, plan.dim, allow_gaps=plan.gaps_allowed)
            return combine_parts(template, parts, plan.dim, new_dim=plan.mode == "stack")


def check_append(
    stored: xr.Dataset,
    new: xr.Dataset,
    plan: Plan,
    where: str,
    new_parts: Sequence[FilePart] = (),
) -> None:
    """Refuse new files that cannot continue the stored dataset along the plan's
    dimension: other variables or dimensions, or coordinates that do not follow the
    stored ones (overlapping, before them, or leaving a gap). ``new_parts``, the new
    files' parts, let a refusal name the file at fault (else "the new files"); the
    stored coordinate's spacing, where it is regular, is the one they must continue."""
    from virtualizarr_fill.assemble import FilePart
    from virtualizarr_fill.assemble.series import order_parts, readable

    dim = plan.dim
    assert dim is not None
    if set(stored.data_vars) != set(new.data_vars):
        raise CliError(
            f"the new files hold other variables ({sorted(map(str, new.data_vars))}) than "
            f"{where} ({sorted(map(str, stored.data_vars))})",
            EXIT_BAD_INPUT,
        )
    for name, variable in new.data_vars.items():
        if variable.dims != stored[name].dims:
            raise CliError(
                f"{name!r} has dimensions {variable.dims} in the new files, "
                f"{stored[name].dims} in {where}",
                EXIT_BAD_INPUT,
            )
    if plan.mode != "series" or dim not in stored.coords or dim not in new.coords:
        return

    def part(url: str, coordinate: Any) -> FilePart:
        return FilePart(url, {}, {}, {}, {}, coords={dim: coordinate})

    before = part(where, stored[dim].variable.load())
    if new_parts and all(dim in p.coords for p in new_parts):
        after = [part(display(p.url), p.coords[dim]) for p in new_parts]
    else:
        after = [part("the new files", new[dim].variable.load())]
    with combining(f"along {dim!r}"):
        _refuse_stored_times(before, after, dim)
        ordered = order_parts([before, *after], dim, allow_gaps=plan.gaps_allowed)
    if ordered[0] is not before:
        first = ordered[0]
        raise CliError(
            f"the new files come before the end of {where} along {dim!r} ({first.url} "
            f"starts at {readable(first.coords[dim].values[0])}, before "
            f"{readable(before.coords[dim].values[-1])}): --append adds files after the "
            "last stored one; rebuild to insert earlier files",
            EXIT_BAD_INPUT,
        )


def _refuse_stored_times(before: FilePart, after: Sequence[FilePart], dim: str) -> None:
    """A new scene at a time the store already holds is refused as two scenes of one
    time are (:func:`~virtualizarr_fill.assemble.time_stack.same_time_error`), wherever
    that time lies in the store (not only at its end)."""
    from virtualizarr_fill.assemble.time_stack import same_time_error
    from virtualizarr_fill.tiff.scene_time import TIME

    if dim != TIME:
        return
    stored = before.coords[dim]
    for part in after:
        values = part.coords[dim].values
        if values.size == 1 and values[0] in stored.values:
            raise same_time_error(before.url, part.url, values[0], stored.attrs)
