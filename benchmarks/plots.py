"""The PNG plots of a benchmark report: throughput vs commit interval, latency CDFs, the LSO lag timeline."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.summary import GUARANTEES, SHORT, THROUGHPUT, interval_sweep, interval_text, point_label


def write_plots(results: dict, summary: dict, references: dict, plot_dir: Path) -> dict[str, str]:
    """Draw the run's plots into ``plot_dir``; their file names by kind (``throughput``, ``latency``, ``lso``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots: dict[str, str] = {}
    if summary:
        base, sweep = interval_sweep(summary)
        fig, ax = plt.subplots(figsize=(8, 5))
        xs = [k.interval_ms for k in sweep]
        for g, colour in zip(GUARANTEES, ("tab:blue", "tab:red")):
            med = [summary[k][g][THROUGHPUT]["median"] or 0 for k in sweep]
            low = [m - (summary[k][g][THROUGHPUT]["min"] or m) for m, k in zip(med, sweep)]
            high = [(summary[k][g][THROUGHPUT]["max"] or m) - m for m, k in zip(med, sweep)]
            ax.errorbar(xs, med, yerr=[low, high], marker="o", capsize=4, color=colour, label=f"pipeline, {g}")
        stock = [(k.interval_ms, summary[k]["stock_faust"][THROUGHPUT]["median"]) for k in sweep
                 if "stock_faust" in summary[k]]
        if stock:
            ax.plot([x for x, _ in stock], [y or 0 for _, y in stock], marker="^", color="tab:purple", linestyle=":",
                    label="stock Faust, at_least_once (no windows, no dead letters)")
        ref = references.get(base.record_bytes)
        if ref:
            ax.axhline(ref["producer"]["median"], color="grey", linestyle="--", label="producer alone (raw)")
            ax.axhline(ref["consumer"]["median"], color="grey", linestyle=":", label="consumer alone (raw)")
            tx = [(s[0], t["records_per_s"]["median"]) for s, t in ref["transactional"].items() if s[0] in xs]
            if tx:
                ax.plot([x for x, _ in tx], [y for _, y in tx], marker="s", color="tab:green", linestyle="-.",
                        label="transactional producer alone")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(xs, [interval_text(x) for x in xs])
        ax.set_xlabel("commit interval")
        ax.set_ylabel("events (records) per second")
        ax.set_title(f"Throughput vs commit interval ({point_label(base).split(', ', 1)[1]})")
        plots["throughput"] = _save(plt, fig, ax, plot_dir, "throughput.png", legend_size=8)

        fig, ax = plt.subplots(figsize=(8, 5))
        keys = list(summary)
        for offset, (g, colour) in zip((-0.2, 0.2), zip(GUARANTEES, ("tab:blue", "tab:red"))):
            spreads = [summary[k][g][THROUGHPUT] for k in keys]
            med = [s["median"] or 0 for s in spreads]
            low = [m - (s["min"] or m) for m, s in zip(med, spreads)]
            high = [(s["max"] or m) - m for m, s in zip(med, spreads)]
            ax.bar([i + offset for i in range(len(keys))], med, width=0.4, yerr=[low, high], capsize=4,
                   color=colour, label=g)
        ax.set_xticks(range(len(keys)), [point_label(k).replace(", ", "\n") for k in keys], fontsize=7)
        ax.set_ylabel("events per second (drain rate)")
        ax.set_title("Throughput at every point: commit interval, record size, partitions, workers, backlog")
        plots["points"] = _save(plt, fig, ax, plot_dir, "throughput_by_point.png", legend_size=8)

        fig, ax = plt.subplots(figsize=(8, 5))
        styles = {"at_least_once": "--", "exactly_once": "-"}
        for i, key in enumerate(summary):
            for g, cdf in summary[key]["cdf"].items():
                if cdf:
                    ax.plot([p[0] for p in cdf], [p[1] for p in cdf], linestyle=styles[g], color=f"C{i}",
                            label=f"{SHORT[g]}, {point_label(key)}")
        ax.set_xscale("log")
        ax.set_xlabel("end-to-end latency, ms (creation → visible to read_committed)")
        ax.set_ylabel("fraction of events")
        ax.set_title("Latency CDFs (median run of each point)")
        plots["latency"] = _save(plt, fig, ax, plot_dir, "latency_cdf.png", legend_size=7)

    scenarios = results.get("long_transaction") or []
    if scenarios:
        fig, axes = plt.subplots(2, len(scenarios), figsize=(6.5 * len(scenarios), 7), squeeze=False, sharex="col")
        for col, s in enumerate(scenarios):
            top, bottom = axes[0][col], axes[1][col]
            parts = sorted({row["partition"] for row in s["timeline"]})
            for p in parts:
                rows = [row for row in s["timeline"] if row["partition"] == p]
                top.plot([r["t"] for r in rows], [r["lag"] for r in rows], label=f"partition {p}",
                         linewidth=2 if p == 0 else 0.8)
            twin = top.twinx()
            rows0 = [row for row in s["timeline"] if row["partition"] == 0]
            twin.plot([r["t"] for r in rows0], [r["lag_ms"] / 1000 for r in rows0], color="black", linestyle=":",
                      label="partition 0 lag, s")
            twin.set_ylabel("partition 0 LSO lag, seconds (dotted)")
            top.set_ylabel("LSO lag, records (HW − LSO)")
            top.set_title(f"{s['mode']}: transaction stalled at {s['stalled_at_s']:.0f} s")
            by_p: dict[int, dict[float, int]] = defaultdict(dict)
            for a in s["reader_arrivals"]:
                by_p[a["partition"]][a["t"]] = a["records"]
            for p in parts:
                points = sorted(by_p[p].items())
                bottom.plot([t for t, _ in points], [n * 2 for _, n in points], label=f"partition {p}",
                            linewidth=2 if p == 0 else 0.8)
            bottom.set_ylabel("read_committed reader, records/s")
            bottom.set_xlabel("seconds since the load started")
            for ax in (top, bottom):
                ax.axvline(s["stalled_at_s"], color="red", linestyle="--", linewidth=1)
                if s["aborted_at_s"] is not None:
                    ax.axvline(s["aborted_at_s"], color="green", linestyle="--", linewidth=1)
                if s["cleared_at_s"] is not None:
                    ax.axvline(s["cleared_at_s"], color="grey", linestyle=":", linewidth=1)
                ax.grid(True, alpha=0.3)
            top.legend(fontsize=7, loc="upper left")
        fig.suptitle("Stalled transaction on merchant-totals[0]\nred: stall, green: abort by hand, grey: LSO moved on",
                     fontsize=10)
        fig.tight_layout()
        fig.savefig(plot_dir / "lso_lag.png", dpi=110)
        plt.close(fig)
        plots["lso"] = "lso_lag.png"
    return plots


def _save(plt: Any, fig: Any, ax: Any, plot_dir: Path, name: str, *, legend_size: int) -> str:
    """Grid, legend and layout of a one-axis plot, written to ``plot_dir/name``; returns ``name``."""
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    fig.savefig(plot_dir / name, dpi=110)
    plt.close(fig)
    return name
