"""Each redesigned figure renders with the axes, scales and legend entries a reader needs.

The figure is captured just before it is saved (the module's ``savefig`` is
wrapped), so the tests read the artists themselves, not the file size.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from bpc.constants import BOOTSTRAP_PROB, CI_KIND, CI_PROB
from bpc.report.plots import model, posterior, replay, style

BOOT = f"{BOOTSTRAP_PROB:.0%} paired bootstrap"
POST = f"{CI_PROB:.0%} posterior {CI_KIND.upper()}"


@pytest.fixture
def captured(monkeypatch):
    """Figures passed to ``savefig`` by the plotting modules, in order."""
    figs = []
    for module in (m for m in (model, posterior, replay, style) if hasattr(m, "savefig")):
        real = module.savefig

        def keep(fig, path, *args, _real=real, **kwargs):
            figs.append(fig)
            return _real(fig, path, *args, **kwargs)

        monkeypatch.setattr(module, "savefig", keep)
    return figs


def _legend_texts(fig) -> list[str]:
    out = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is not None:
            out += [t.get_text() for t in leg.get_texts()]
            out.append(leg.get_title().get_text())
    return out


def _replay_table() -> pd.DataFrame:
    """Two cells; on SWE the DP wins by abstaining (Δ > 0, pass rate 0 < always_verify's 0.3)."""
    rows = [
        ("lcb_hard", "gpt5_mini", "always_verify", 0.0, 0.0, 0.0, 0.375, 33.75, 8),
        ("lcb_hard", "gpt5_mini", "bayesian_greedy", 0.0, 0.0, 0.0, 0.375, 33.75, 8),
        ("lcb_hard", "gpt5_mini", "bayesian_dp", 4.0, 0.5, 7.0, 0.375, 29.75, 8),
        ("swebench_lite", "gpt5_mini", "always_verify", 0.0, 0.0, 0.0, 0.3, 242.0, 75),
        ("swebench_lite", "gpt5_mini", "bayesian_greedy", 202.0, 170.0, 232.0, 0.0, 10.0, 75),
        ("swebench_lite", "gpt5_mini", "bayesian_dp", 202.0, 170.0, 232.0, 0.0, 10.0, 75),
    ]
    cols = ["benchmark", "generator", "policy", "delta", "ci_lo", "ci_hi", "pass_rate"]
    df = pd.DataFrame(rows, columns=[*cols, "cost_per_instance", "n_instances"])
    df["mean_utility"] = 100 * df["pass_rate"] - df["cost_per_instance"]
    return df.assign(split="eval")


def test_delta_bars_show_zero_deltas_pass_rate_and_flags(captured, tmp_path):
    replay.plot_delta_bars(_replay_table(), tmp_path / "bars.png")
    (fig,) = captured
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    lcb = axes[0]
    ticks = [t.get_text() for t in lcb.get_yticklabels()]
    assert "always_verify (reference)" in ticks and "bayesian_greedy" in ticks
    xs = np.concatenate([c.get_offsets()[:, 0] for c in lcb.collections if len(c.get_offsets())])
    assert np.sum(xs == 0.0) == 2  # both zero-Δ policies are drawn, not hidden as zero-height bars
    notes = [t.get_text() for t in axes[1].texts]
    assert "0% · 10 · 75" in notes and "30% · 242 · 75" in notes  # pass rate · cost/instance · n
    assert any(t.endswith("†") for t in (x.get_text() for x in axes[1].get_yticklabels()))
    legend = _legend_texts(fig)
    assert any(BOOT in t for t in legend) and any("wins by abstaining" in t for t in legend)
    assert "Δ utility vs always_verify" in lcb.get_xlabel()


def test_delta_intervals_name_both_interval_kinds(captured, tmp_path):
    table = _replay_table().rename(columns={"n_instances": "n_eval"})
    table = table.assign(post_mean=table["delta"], post_lo=table["ci_lo"], post_hi=table["ci_hi"])
    from bpc.report.tables import flag_abstention

    replay.plot_delta_bars(flag_abstention(table), tmp_path / "di.png", ncols=3)
    (fig,) = captured
    legend = _legend_texts(fig)
    assert any(BOOT in t for t in legend)
    assert any(f"{CI_PROB:.0%} {CI_KIND.upper()}" in t for t in legend)
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert "bayesian_DP †" in labels and "always_verify (reference)" in labels
    assert {"0% · 10 · 75", "30% · 242 · 75"} <= {t.get_text() for t in fig.axes[1].texts}


@pytest.fixture(scope="module")
def uncertainty():
    from bpc.costs import paper_costs_for
    from bpc.data.counts import counts_from_records
    from bpc.data.simulate import simulate_panel
    from bpc.decide.uncertainty import policy_uncertainty
    from bpc.estimate.conjugate import conjugate_posterior

    panel = simulate_panel(1, scale=0.2, benchmarks=["lcb_easy"], generators=["gpt5_mini"])
    counts = counts_from_records(panel.records, panel.trajectories, source="simulated")
    return policy_uncertainty(conjugate_posterior(counts, draws=12, chains=1, seed=1), paper_costs_for)


def test_value_bands_separate_value_decision_and_loss(captured, tmp_path, uncertainty):
    posterior.plot_value_bands(uncertainty, tmp_path / "vb.png")
    (fig,) = captured
    top, strip, loss = fig.axes
    assert top.get_ylabel() == "V(b)" and loss.get_ylabel() == "V − Q_a (loss)"
    assert loss.get_xlabel() == "belief b" and loss.get_yscale() == "symlog"
    assert strip.images, "the best-action strip is drawn"
    legend = _legend_texts(fig)
    assert f"V(b), {POST}" in legend
    assert {"stop", "verify", "regenerate", "syn", "test", "llm"} <= set(legend)
    syn = next(line for line in loss.get_lines() if line.get_marker() == "o")
    assert to_hex(syn.get_color()) != "#f0e442"  # not the yellow that vanished on white
    styles = {(line.get_linestyle(), line.get_marker()) for line in loss.get_lines()}
    assert len(styles) >= 5  # actions differ in style, not only in colour


def test_forest_uses_logit_axis_names_generators_and_marks_missing(captured, tmp_path):
    rows = []
    for g, prior_n in (("gpt5_mini", 300), ("haiku45", 0)):
        rows.append(("lcb_hard", g, "prior", 60, prior_n, 0.2, 0.21, 0.15, 0.28))
        rows.append(("lcb_hard", g, "tpr_syn", 59, 60, 0.98, 0.985, 0.97, 0.995))
        rows.append(("lcb_hard", g, "tpr_test", 0, 0, np.nan, np.nan, np.nan, np.nan))
    cols = ["benchmark", "generator", "rate", "k", "n", "laplace", "mean", "lo", "hi"]
    model.plot_forest(pd.DataFrame(rows, columns=cols), tmp_path / "forest.png")
    (fig,) = captured
    prior_ax, tpr_ax, _ = fig.axes
    assert tpr_ax.get_xscale() == "logit" and tpr_ax.get_xlim()[0] > 0.5  # zoomed to where the rates are
    labels = [t.get_text() for t in prior_ax.get_yticklabels()]
    assert labels == ["LCB-hard / gpt-5-mini  (n=300)", "LCB-hard / claude-haiku-4.5  (no data)"]
    legend = _legend_texts(fig)
    assert {"gpt5_mini", "haiku45"} <= set(legend)
    assert f"posterior mean, {CI_PROB:.0%} {CI_KIND.upper()}" in legend
    assert any("no data" in t for t in legend) and any("not defined" in t for t in legend)


# ---------------------------------------------------------------------------
# Figures from 1 to 54 cells: pages under the size limit, a legend on each
# ---------------------------------------------------------------------------
def _png_size(path) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as im:
        return im.size


def _panel_54(unc):
    """The one-cell uncertainty repeated over the paper's 9 × 6 panel (cheap stand-in for 54 solves)."""
    from bpc.constants import BENCHMARKS, GENERATORS

    wide = unc.isel(benchmark=[0] * len(BENCHMARKS), generator=[0] * len(GENERATORS))
    return wide.assign_coords(benchmark=list(BENCHMARKS), generator=list(GENERATORS))


@pytest.mark.parametrize("plot", ["plot_action_probabilities", "plot_value_bands"])
def test_per_cell_uncertainty_figures_page_at_54_cells(captured, tmp_path, uncertainty, plot):
    from bpc.report.plots.style import MAX_FIGURE_PX

    files = getattr(posterior, plot)(_panel_54(uncertainty), tmp_path / f"{plot}.png")
    assert len(files) == len(captured) > 1
    assert files[0].name == f"{plot}.png" and files[1].name == f"{plot}_p2.png"
    for path, fig in zip(files, captured, strict=True):
        assert max(_png_size(path)) <= MAX_FIGURE_PX, path
        assert _legend_texts(fig), f"{path.name} has no legend"
        assert "page" in fig._suptitle.get_text()
    assert sum(ax.get_title() != "" for fig in captured for ax in fig.axes) >= 54


def test_one_cell_is_one_page_without_a_page_note(captured, tmp_path, uncertainty):
    (path,) = posterior.plot_action_probabilities(uncertainty, tmp_path / "p.png")
    assert path.name == "p.png" and "page" not in captured[0]._suptitle.get_text()


def test_delta_intervals_page_at_54_cells(captured, tmp_path):
    from bpc.constants import BENCHMARKS, GENERATORS
    from bpc.report.plots.style import MAX_FIGURE_PX

    one = _replay_table().rename(columns={"n_instances": "n_eval"})
    one = one[one["benchmark"] == "lcb_hard"]
    table = pd.concat(
        [one.assign(benchmark=b, generator=g) for b in BENCHMARKS for g in GENERATORS], ignore_index=True
    )
    table = table.assign(post_mean=table["delta"], post_lo=table["ci_lo"], post_hi=table["ci_hi"])
    files = replay.plot_delta_bars(table, tmp_path / "di.png", ncols=3)
    assert len(files) > 1
    for path, fig in zip(files, captured, strict=True):
        assert max(_png_size(path)) <= MAX_FIGURE_PX
        assert any(BOOT in t for t in _legend_texts(fig))


def test_shrinkage_names_generators_and_does_not_overprint(captured, tmp_path):
    from bpc.data.load import load_counts
    from bpc.estimate.conjugate import conjugate_posterior
    from bpc.estimate.laplace import laplace
    from bpc.report.plots.style import GENERATOR_LABELS, MAX_FIGURE_PX

    counts = load_counts("simulated", progress=False)
    (path,) = model.plot_shrinkage(
        laplace(counts), conjugate_posterior(counts, draws=20, chains=1), tmp_path / "s"
    )
    (fig,) = captured
    legend = _legend_texts(fig)
    assert {GENERATOR_LABELS[g] for g in ("gpt5_mini", "haiku45")} <= set(legend)
    for ax in fig.axes:  # the moved cells are numbered on the plot and named once under it
        marks = [t.get_text() for t in ax.texts if t.get_text().isdigit()]
        assert marks == ["1", "2", "3"]
        names = [t.get_text() for t in ax.texts if not t.get_text().isdigit()]
        assert len(names) == 1 and names[0].count("\n") == 2
    assert max(_png_size(path)) <= MAX_FIGURE_PX


def test_prr_shows_n_and_ties(tmp_path, monkeypatch):
    from bpc.report.plots import analyses as plots

    figs = []
    real = style.savefig
    monkeypatch.setattr(style, "savefig", lambda fig, path, **kw: figs.append(fig) or real(fig, path, **kw))
    table = pd.DataFrame(
        {
            "benchmark": ["lcb_hard", "lcb_hard", "mbpp_plus"],
            "generator": ["gpt5_mini", "haiku45", "pooled"],
            "n_patches": [24, 30, 54],
            "mean_Y": [0.25, 0.0, 0.4],
            "prr_belief": [1.0, np.nan, 0.6],
            "prr_tool_success": [1.0, np.nan, 0.3],
        }
    )
    plots.plot_prr(table, tmp_path / "prr", formats=("png",))
    (fig,) = figs
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[0].endswith("n=24, pass 25%") and ticks[2].endswith("n=54, pass 40%")
    assert [t.get_text() for t in ax.texts] == ["tie", "one label"]
    assert "tie in 1 of 3 groups" in ax.get_title()


def test_regime_map_background_only_where_cells_lie(tmp_path, monkeypatch):
    from bpc.report.plots import analyses as plots

    figs = []
    real = plots.savefig
    monkeypatch.setattr(plots, "savefig", lambda fig, path, **kw: figs.append(fig) or real(fig, path, **kw))
    points = pd.DataFrame(
        {
            "benchmark": ["a"] * 4,
            "generator": ["g"] * 4,
            "prior": [0.1, 0.1, 0.2, 0.2],
            "ratio": [0.05, 1.0, 0.05, 1.0],
            "regime": ["A", "C", "A", "B"],
        }
    )
    grid = np.linspace(0, 1, 101)
    background = {"prior": grid, "ratio": np.logspace(-2, 0, 5), "z": np.full((5, 101), "A", dtype=object)}
    plots.plot_regime_map(points, background, tmp_path / "r", title="map", formats=("png",))
    mesh = figs[0].axes[0].collections[0]
    drawn = ~np.ma.getmaskarray(mesh.get_array()).reshape(5, 101)[0]
    assert drawn[10] and drawn[20] and not drawn[50] and not drawn[90]  # nothing drawn at priors 0.5, 0.9
    assert any("blank: no cell" in t for t in _legend_texts(figs[0]))


def _protocol_deltas(benchmarks, generators) -> pd.DataFrame:
    rows = []
    for i, b in enumerate(benchmarks):
        for j, g in enumerate(generators):
            for pol, shift in (("bayesian_dp", 0.0), ("bayesian_greedy", -1.0)):
                d = float(i - j) + shift
                rows.append((b, g, pol, "best_simple", d, d - 2.0, d + 2.0, 10 + j, 1, 0.89))
    cols = ["benchmark", "generator", "policy", "reference", "delta", "ci_lo", "ci_hi", "n_tasks", "n_seeds"]
    return pd.DataFrame(rows, columns=[*cols, "prob"])


def test_protocol_deltas_panel_per_benchmark_with_n_and_legend(captured, tmp_path):
    from bpc.constants import BENCHMARKS, GENERATORS
    from bpc.report.plots.style import GENERATOR_LABELS, MAX_FIGURE_PX

    files = replay.plot_protocol_deltas(_protocol_deltas(BENCHMARKS, GENERATORS), tmp_path / "pd.png")
    assert len(files) == 1 and max(_png_size(files[0])) <= MAX_FIGURE_PX
    fig = captured[0]
    assert sorted(_legend_texts(fig)) == ["bayesian_DP", "bayesian_greedy"]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == len(BENCHMARKS)
    first = panels[0]
    assert first.get_title() == "LCB-hard"  # the paper's order, not alphabetical
    assert [t.get_text() for t in first.get_yticklabels()] == [GENERATOR_LABELS[g] for g in GENERATORS]
    assert {t.get_text() for t in first.texts} == {f"n={10 + j}" for j in range(len(GENERATORS))}
    assert "89% task-clustered CI" in panels[-1].get_xlabel()
    # the interval drawn is the table's: one bar per (generator, policy) from ci_lo to ci_hi
    segs = np.concatenate([c.get_segments() for c in first.collections if hasattr(c, "get_segments")])
    assert np.allclose(sorted(s[1, 0] - s[0, 0] for s in segs), 4.0)


def test_protocol_deltas_page_when_benchmarks_are_many(captured, tmp_path):
    from bpc.report.plots.style import MAX_FIGURE_PX

    benches = [f"bench{i:02d}" for i in range(30)]
    gens = [f"g{j}" for j in range(6)]
    files = replay.plot_protocol_deltas(_protocol_deltas(benches, gens), tmp_path / "pd.png")
    assert len(files) > 1 and files[1].name == "pd_p2.png"
    for path, fig in zip(files, captured, strict=True):
        assert max(_png_size(path)) <= MAX_FIGURE_PX, path
        assert _legend_texts(fig) and "page" in fig._suptitle.get_text()
    with pytest.raises(ValueError, match="no row with reference"):
        replay.plot_protocol_deltas(_protocol_deltas(benches, ["g1"]), tmp_path / "x.png", reference="stop")


def test_loco_efficiency_legend_marks_failed_refits_only_when_a_point_uses_one(captured, tmp_path):
    """The open-marker legend entry appears only when some plotted point is built from a failed refit."""
    from bpc.report.plots.style import MAX_FIGURE_PX

    rows = [
        ("lcb_hard", "gpt5_mini", 0, "laplace", 0.0, 0.0, 0.0, 0),
        ("lcb_hard", "gpt5_mini", 0, "complete_pooling", 18.8, 11.9, 24.5, 0),
        ("lcb_hard", "gpt5_mini", 3, "laplace", 0.0, 0.0, 0.0, 0),
        ("lcb_hard", "gpt5_mini", 3, "posterior_mean_dp", 10.2, 5.0, 15.6, 0),
        ("lcb_hard", "gpt5_mini", -1, "posterior_mean_dp", 0.0, 0.0, 0.0, 0),
    ]
    cols = ["benchmark", "generator", "k", "method", "diff", "ci_lo", "ci_hi", "failed_used"]
    eff = pd.DataFrame(rows, columns=cols).assign(reference="laplace", n_tasks=29)
    files = posterior.plot_loco_efficiency(eff, tmp_path / "eff.png")
    assert len(files) == 1 and max(_png_size(files[0])) <= MAX_FIGURE_PX
    assert sorted(_legend_texts(captured[0])) == ["complete_pooling", "posterior_mean_dp"]
    ax = captured[0].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "3", "all"]
    assert ax.get_ylabel() == "utility − laplace" and "n = 29 tasks" in ax.get_title()
    eff.loc[3, "failed_used"] = 2
    posterior.plot_loco_efficiency(eff, tmp_path / "eff2.png")
    assert "uses a failed refit (flagged)" in _legend_texts(captured[1])


def test_predicted_vs_realised_keeps_coinciding_policies_visible(captured, tmp_path):
    """Two policies with the same points: distinct shapes, the later one drawn smaller and on top."""
    from bpc.report.plots.style import MAX_FIGURE_PX

    base = pd.DataFrame(
        {"delta": [5.0, 12.0], "post_mean": [6.0, 10.0], "pred_lo": [1.0, 8.0], "pred_hi": [9.0, 11.0]}
    )
    checks = pd.concat(
        [
            base.assign(policy="bayesian_greedy", covered=[True, False]),
            base.assign(policy="bayesian_dp", covered=[True, False]),
        ],
        ignore_index=True,
    )
    files = posterior.plot_predicted_vs_realised(checks, tmp_path / "pvr.png")
    assert len(files) == 1 and max(_png_size(files[0])) <= MAX_FIGURE_PX
    ax = captured[0].axes[0]
    assert ax.get_xlabel().startswith("realised held-out Δ") and "predictive interval" in ax.get_ylabel()
    assert [t for t in _legend_texts(captured[0]) if "covered" in t] == [
        "bayesian_greedy (1/2 covered)",
        "bayesian_DP (1/2 covered)",
    ]
    filled = [c for c in ax.collections if c.get_label() and "covered" in c.get_label()]
    paths = [c.get_paths()[0].vertices.round(3).tolist() for c in filled]
    assert paths[0] != paths[1]  # different marker shapes
    (s0,), (s1,) = (c.get_sizes() for c in filled)
    assert s1 < s0 and filled[1].get_zorder() > filled[0].get_zorder()
    with pytest.raises(ValueError, match="no checks"):
        posterior.plot_predicted_vs_realised(checks.iloc[:0], tmp_path / "empty.png")
