"""The one writer: a figure's place in the report holds every page drawn there, numbered, or nothing."""

import pandas as pd

from bpc.evaluate import Result
from bpc.report import write
from bpc.report.markdown import Report


def _pages(n: int):
    def draw(path):
        for k in range(n):
            name = path.with_name(f"{path.name}_p{k + 1}" if k else path.name).with_suffix(".png")
            name.parent.mkdir(parents=True, exist_ok=True)
            name.write_bytes(b"\x89PNG")

    return draw


def test_figure_pages_in_their_place(tmp_path):
    rep = Report("t")
    rep.text("before")
    rep.figure("figs/a", "A")
    rep.figure("none", "nothing drawn")
    rep.figure("b", "B")
    rep.text("after")
    figures = {"figs/a": _pages(11), "none": _pages(0), "b": _pages(1)}
    result = Result("t", tables={"x": pd.DataFrame({"v": [1]})}, text=rep.markdown, figures=figures)
    text = (write(result, tmp_path / "out") / "report.md").read_text()
    pages = [f"figs/a_p{k}.png" if k > 1 else "figs/a.png" for k in range(1, 12)]
    expected = [f"![A (page {k} of 11)]({p})\n\n*A (page {k} of 11)*\n" for k, p in enumerate(pages, 1)]
    assert text == "\n".join(["# t\n", "before\n", *expected, "![B](b.png)\n\n*B*\n", "after\n"])
