"""The parser report collector is per context and free outside a collect() block."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from virtualizarr_fill.report import ArrayReport, collect, record_array, record_refusal


def test_records_only_inside_collect() -> None:
    record_array(ArrayReport(url="file:///a", name="x"))  # no collector: dropped
    with collect() as report:
        record_array(ArrayReport(url="file:///a", name="x", edge_handling="truncate"))
        record_refusal("file:///a", "y", "scaleoffset filter")
    record_refusal("file:///a", "z", "after the block")
    assert [a.name for a in report.arrays] == ["x"]
    assert [(r.name, r.reason) for r in report.refusals] == [("y", "scaleoffset filter")]


def test_threads_do_not_see_each_others_reports() -> None:
    def parse(name: str) -> list[str]:
        with collect() as report:
            for i in range(50):
                record_array(ArrayReport(url=f"file:///{name}", name=f"{name}{i}"))
        return sorted({a.url for a in report.arrays})

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(parse, ["a", "b", "c", "d"]))
    assert results == [["file:///a"], ["file:///b"], ["file:///c"], ["file:///d"]]
