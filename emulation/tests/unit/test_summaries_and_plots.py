"""How a bundle's summary.md opens and how every plot looks (issue 40): the result first (each scheme's headline
figure, the fidelity verdict, the claims beside the papers), no table wider than markdown.WIDEST, no OVS in a bpf
run's summary; one colour per scheme in every plot (a bundle's and a merge's), titles that say where, units on the
axes, plain ticks on log axes, K and the buffer on queue plots, a CDF's share at 0, legends off the data. Bundles
are written with the bundle's own writer (test_kind_summaries.py's helpers); no emulation."""

import csv
import json
import math

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ccemu.kinds import KINDS  # noqa: E402
from ccemu.model import schemes as registry  # noqa: E402
from ccemu.results import fidelity, plotting  # noqa: E402
from ccemu.results.bundle import BlockKey  # noqa: E402
from ccemu.results.markdown import WIDEST, table  # noqa: E402
from ccemu.reports.merge import Entry, merge  # noqa: E402
from ccemu.reports.report import plot, summary_markdown  # noqa: E402
from ccemu.results.rows import PortRow  # noqa: E402
from test_kind_summaries import converging, flow, ran, row, stored, tables_of  # noqa: E402

SCHEMES = {"convergence": ("expresspass", "dctcp"), "victim": ("dcqcn", "dcqcn+tcd")}
POINTS = {"incast": (("N", 2), ("N", 256)), "realistic": (("load", 0.2), ("load", 0.6))}
BUFFER, K = 128_000, 32_000


def keys(kind: str) -> list[BlockKey]:
    """The blocks of a two-scheme bundle of `kind`: each scheme at each of the kind's points (one block without)."""
    schemes = SCHEMES.get(kind, ("expresspass", "dctcp"))
    if kind == "convergence":
        return [BlockKey(schemes[0], (("alpha", 0.5),)), BlockKey(schemes[1])]
    return [BlockKey(s, (p,)) for s in schemes for p in POINTS.get(kind, ())] or [BlockKey(s) for s in schemes]


def bundle(tmp_path, kind: str, verdicts: dict[str, str] | None = None, **manifest):
    """A bundle of `kind` in which every block ran: dctcp's flows take 2x expresspass's (the credit schemes' and
    dcqcn+tcd's the shorter); the bottleneck port's queue histogram has a share at 0; the victim's flows are its
    victims; the ports have a buffer and DCTCP's K. `verdicts`: each scheme's fidelity verdict (PASS)."""
    rows = []
    for key in keys(kind):
        if kind == "convergence":
            rows += converging(key)
            continue
        slow = 2.0 if key.scheme in ("dctcp", "dcqcn") else 1.0
        flows = [flow(key, f"h{i + 2}", 50_000, slow * 0.1 * (i + 1), 0.05, dst=7, flow_id=i, round_number=1,
                      cnps_ce=int(slow > 1 and i == 0)) for i in range(4)]
        rows += [ran(key, flows, duration=slow * 0.4), *flows,
                 row(PortRow, key, node="s1", port="s1-eth1", bottleneck=1, data_enqueued=100, max_data_queue=90_000,
                     mean_data_queue_arrival=9_000, data_queue_byte_s=90, histogram="5 0 0 0 0 0 0 0 0 3 2")]
    schemes = list(dict.fromkeys(k.scheme for k in keys(kind)))
    verdicts = verdicts or {}
    blocks = [{**k.columns(), "status": verdicts.get(k.scheme, "PASS"), "switch_residence_p50_frames": 0.1}
              for k in keys(kind)]
    worst = max(verdicts.values(), key=["PASS", "WARN", "FAIL"].index, default="PASS")
    directory = stored(tmp_path, kind, *rows, dilation=100, dctcp_k_bytes=K, fidelity={"status": worst, "reasons": [],
                                                                                      "blocks": blocks},
                       workload={"victim_senders": ["h2", "h3", "h4", "h5"], "victim_receiver": "h7", "load": 0.5},
                       **manifest)
    written = json.loads((directory / "manifest.json").read_text())
    written["config"] |= {"topology": {"kind": "fattree", "k": 4},
                          "schemes": [{"scheme": s, "port": {"buffer_bytes": BUFFER}} for s in schemes]}
    (directory / "manifest.json").write_text(json.dumps(written))
    return directory


def opening(summary: str) -> list[str]:
    """The summary's paragraphs before the run's particulars (the commit line)."""
    lines = summary.splitlines()
    return [line for line in lines[2:next(i for i, line in enumerate(lines) if line.startswith("Commit"))] if line]


# summary.md opens with the result ------------------------------------------------------------------

def test_summary_opens_with_each_schemes_headline_and_verdict(tmp_path):
    directory = bundle(tmp_path, "incast", verdicts={"dctcp": "WARN"})
    headline, verdict, papers = opening(summary_markdown(directory))
    # At N = 256, the paper's N (>= 200): each round carries 4 x 50 000 B; expresspass's takes 0.4 s wall (its
    # longest flow): 4 Mbit/s, 0.40 of the 10 Mbit/s link, 4 ms of datacenter time; dctcp's twice as long.
    assert headline == ("**Goodput at N = 256, share of the link (a request's completion, datacenter time)**: "
                        "expresspass 0.40 (4.0 ms); dctcp 0.20 (8.0 ms).")
    assert verdict == "Fidelity: **WARN** (expresspass PASS, dctcp WARN)."
    assert papers.startswith("Beside the papers: **0 reproduced, 0 same direction only, 0 not reproduced, ")
    assert papers.endswith("(of 15 claims); 7 of the not comparable because the paper's figure is for "
                           "transport.rto_min_ms 200 (this run: None); each claim in the last section.")


@pytest.mark.parametrize("kind, headline", [
    # Slowdown = FCT / 50 ms: 2 4 6 8 for expresspass, twice that for dctcp: means 5 and 10 at either load.
    ("realistic", "**Mean FCT slowdown (FCT / ideal FCT) at load 0.2 / 0.6**: expresspass 5.00 / 5.00; "
                  "dctcp 10.00 / 10.00."),
    # One of dcqcn's four victims was marked CE; dcqcn+tcd's none.
    ("victim", "**Victim flows marked CE, taken for congested (the victims' mean FCT slowdown)**: dcqcn 25% "
               "(10.00); dcqcn+tcd 0% (5.00)."),
    # FCTs 0.1-0.4 s wall / 100: p99 at rank 2.97 of 1 2 3 4 ms = 3.97 ms; dctcp's twice that.
    ("shuffle", "**FCT p99, ms (datacenter time)**: expresspass 3.97; dctcp 7.94."),
    # 50 000 B in 1-4 ms: 0.4, 0.2, 0.133 and 0.1 Gbit/s, mean 0.208 of the 1 Gbit/s datacenter link (10 Mbit/s x
    # 100); dctcp's half that.
    ("permutation", "**Mean flow throughput, Gbit/s at the datacenter rate (share of the link; slowest flow)**: "
                    "expresspass 0.21 (0.21; slowest 0.10); dctcp 0.10 (0.10; slowest 0.05)."),
    # test_kind_summaries' converging block: the joiner reached its share 3.5 RTTs after its join, and the flows
    # converged 8.0 after it: expresspass is read as reached, dctcp as converged.
    ("convergence", "**RTTs to the fair share, median over the joining flows (credit schemes: until the joiner "
                    "reached it; the others: until every flow converged; -: not within the run)**: expresspass 3.5 "
                    "at alpha 0.5; dctcp 8.0."),
])
def test_each_kinds_summary_opens_with_the_figure_its_papers_lead_with(tmp_path, kind, headline):
    first, verdict = opening(summary_markdown(bundle(tmp_path, kind)))[:2]
    assert first == headline
    assert verdict == "Fidelity: **PASS** for every scheme."


# Tables ------------------------------------------------------------------------------------------

def test_a_wide_table_splits_at_its_breaks_into_parts_that_each_name_the_row():
    header = ["scheme", "N", *(f"c{i}" for i in range(14))]
    rows = [["dctcp", "8", *(str(i) for i in range(14))]]
    parts = tables_of(table(header, rows, keys=2, breaks=("c5",)))
    # Before c5: 5 columns and the 2 of the row's name; from c5 on, 9 more: too wide, cut into two even parts.
    assert [h for h, _ in parts] == [["scheme", "N", "c0", "c1", "c2", "c3", "c4"],
                                     ["scheme", "N", "c5", "c6", "c7", "c8", "c9"],
                                     ["scheme", "N", "c10", "c11", "c12", "c13"]]
    assert [r for _, r in parts] == [["| dctcp | 8 | 0 | 1 | 2 | 3 | 4 |"], ["| dctcp | 8 | 5 | 6 | 7 | 8 | 9 |"],
                                     ["| dctcp | 8 | 10 | 11 | 12 | 13 |"]]
    assert table(header[:5], [r[:5] for r in rows]) == ["| scheme | N | c0 | c1 | c2 |", "|---|---|---|---|---|",
                                                       "| dctcp | 8 | 0 | 1 | 2 |"]  # a narrow one as it was


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_table_of_a_summary_is_wider_than_ten_columns(tmp_path, kind):
    summary = summary_markdown(bundle(tmp_path, kind))
    widths = {len(header) for header, _ in tables_of(summary.splitlines())}
    assert widths and max(widths) <= 10 == WIDEST  # a number here: the module's could drift with the tables


# The datapath ------------------------------------------------------------------------------------

def test_a_bpf_runs_summary_never_names_ovs_vswitchd(tmp_path):
    directory = bundle(tmp_path, "incast", datapath="bpf")
    summary = summary_markdown(directory)
    assert "ovs-vswitchd" not in summary
    assert "Switch residence: time a packet spent inside a switch, in the kernel's bpf forwarding" in summary
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["datapath"] = "ovs"
    (directory / "manifest.json").write_text(json.dumps(manifest))
    assert "in ovs-vswitchd's receive sockets" in summary_markdown(directory)


def test_the_verdicts_reasons_about_the_switches_name_no_datapath():
    class Held:  # every switch held its packets 9 frames and lost a tenth of them
        def residence_frames(self, q):
            return 9.0

        def worst_switch(self):
            return "s1", 9.0

        lost_packets, arrived_packets = 10, 100

    verdict = fidelity.judge(fidelity.Observation(steal=0.0, busy=0.1, frame_bytes=1538, switches=Held()))
    assert verdict.status == fidelity.FAIL and len(verdict.reasons) == 2
    assert not any("ovs" in reason for reason in verdict.reasons)


# Plots -------------------------------------------------------------------------------------------

@pytest.fixture
def drawn(monkeypatch):
    """The figures the plots would save, kept open and drawn (their layout done) instead."""
    figures = []

    def keep(fig, path):
        fig.canvas.draw()
        figures.append(fig)
        return path

    monkeypatch.setattr(plotting, "save", keep)
    yield figures
    plt.close("all")


def scheme_of(label: str) -> str | None:
    """The scheme an artist's label names first ("dctcp+ p99": dctcp+), None for another label."""
    names = sorted(registry.names(), key=len, reverse=True)
    return next((s for s in names if label == s or label.startswith((f"{s} ", f"{s}:"))), None)


def artists(fig):
    for ax in fig.axes:
        yield from ((a, a.get_color()) for a in ax.get_lines())
        yield from ((a, a.get_facecolor()) for a in ax.patches)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_plot_draws_a_scheme_in_its_one_colour(tmp_path, kind, drawn):
    from matplotlib.colors import to_rgb

    plot(bundle(tmp_path, kind))
    seen = set()
    for fig in drawn:
        for artist, color in artists(fig):
            scheme = scheme_of(artist.get_label())
            if scheme:
                assert to_rgb(color) == to_rgb(plotting.scheme_color(scheme)), (artist.get_label(), fig.texts)
                seen.add(scheme)
    assert seen == {k.scheme for k in keys(kind)}


def test_every_registered_scheme_has_a_colour_of_its_own_and_an_unknown_one_the_same_every_time():
    colours = [plotting.scheme_color(s) for s in registry.names()]
    assert set(registry.names()) >= {"expresspass", "spraypass", "dctcp", "dctcp+", "dcqcn", "dcqcn+tcd"}
    assert len(set(colours)) == len(colours)
    unknown = [plotting.scheme_color(f"newcc{i}") for i in range(8)]
    assert unknown == [plotting.scheme_color(f"newcc{i}") for i in range(8)] and not set(unknown) & set(colours)


@pytest.mark.parametrize("params", [{}, {"transport.rto_min_ms": "1"}])  # bars per block; lines against the value
def test_a_merges_plots_draw_each_scheme_in_its_colour(tmp_path, drawn, params):
    from matplotlib.colors import to_rgb

    entries = [Entry(str(n), bundle(tmp_path / str(n), "incast"), {k: str(n * int(v)) for k, v in params.items()})
               for n in (1, 2)]
    merge(tmp_path / "merged", entries, "t")
    seen = [(artist, color) for fig in drawn for artist, color in artists(fig) if scheme_of(artist.get_label())]
    assert {scheme_of(a.get_label()) for a, _ in seen} == {"expresspass", "dctcp"}
    assert all(to_rgb(c) == to_rgb(plotting.scheme_color(scheme_of(a.get_label()))) for a, c in seen)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_plot_says_what_and_where_with_units_on_its_axes_and_plain_log_ticks(tmp_path, kind, drawn):
    plot(bundle(tmp_path, kind))
    assert drawn
    for fig in drawn:
        titles = [fig.get_suptitle(), *(ax.get_title() for ax in fig.axes)]
        assert any(f"{kind} on a fat-tree with k=4" in t for t in titles), titles
        for ax in fig.axes:
            for label in (ax.get_xlabel(), ax.get_ylabel()):
                assert not label or "(" in label, label  # the unit, or what the number is, in parentheses
            ticks = [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
            assert not any("^" in t or "times" in t for t in ticks), ticks  # 10, 100, 1k: not 10^2
    assert plotting.plain_number(1000) == "1k" and plotting.plain_number(0.1) == "0.1"


def test_the_queue_plot_marks_k_and_the_buffer_and_starts_the_cdf_at_its_share_at_zero(tmp_path, drawn):
    plot(bundle(tmp_path, "incast"))
    (ax,) = next(fig for fig in drawn if "Queue" in fig.axes[0].get_title()).axes
    levels = {line.get_label(): line.get_xdata()[0] for line in ax.get_lines() if line.get_label()[0] in "Kb"}
    assert levels == {"K = 32 KB: DCTCP's ECN marking threshold": 32.0, "buffer 128 KB": 128.0}
    # Bucket 0 (under 64 B: empty) holds 5 of the 10 frames: the CDF is 0.5 at 0, marked there, and 0 is on the axis.
    dots = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert dots and all((line.get_xdata()[0], line.get_ydata()[0]) == (0.0, 0.5) for line in dots)
    assert ax.get_xscale() == "symlog" and ax.get_xlim()[0] < 0.0 < ax.get_xlim()[1]


def test_a_cdf_of_values_with_zeros_starts_at_their_share():
    assert plotting.ecdf([0.0, 2.0, 0.0, 1.0]) == (0.5, [(1.0, 0.75), (2.0, 1.0)])


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_legend_covers_the_data(tmp_path, kind, drawn):
    plot(bundle(tmp_path, kind))
    for fig in drawn:
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
        for legend in legends:
            box = legend.get_window_extent()
            assert not any(box.overlaps(ax.get_window_extent()) for ax in fig.axes), legend.get_texts()[0]


def test_a_missing_figure_breaks_the_line_rather_than_joining_its_neighbours(tmp_path, drawn):
    directory = bundle(tmp_path, "incast")
    # N = 256 of dctcp never finished its round: its goodput is missing, not 0 and not the line from N = 2.
    with open(directory / "rounds.csv", newline="") as source:
        rounds = list(csv.DictReader(source))
    for r in rounds:
        if (r["scheme"], r["n"]) == ("dctcp", "256"):
            r["finished"] = str(int(r["flows"]) - 1)
    with open(directory / "rounds.csv", "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rounds[0]))
        writer.writeheader()
        writer.writerows(rounds)
    plot(directory)
    fig = next(f for f in drawn if "against N" in f.get_suptitle())
    (line,) = [line for line in fig.axes[0].get_lines() if line.get_label() == "dctcp"]
    assert math.isnan(list(line.get_ydata())[-1])
