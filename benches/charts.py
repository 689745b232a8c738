"""PNG charts (matplotlib, Agg backend): grouped bars, one panel per measure.

A missing value (wrong, error, n/a) leaves its bar out and puts a small "x" on the axis, so a
gap is never read as "fast".
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLORS = {"quiver": "#d62728", "quiver-fragments": "#ff9896", "quiver-nocoalesce": "#ff7f0e",
          "duckdb": "#e6b800", "chdb": "#1f77b4", "datafusion": "#2ca02c"}


def grouped_bars(path, title, categories, panels, ylabel, reference_line=None):
    """panels: [(subtitle, {series label: (engine name, [value or None per category])}
    [, ylabel [, y scale]])]: a panel may name its own y label and scale ("symlog": counts
    from 0 over several orders of magnitude)."""
    width = max(6.0, 0.45 * len(categories) * max(1, len(panels[0][1])) / 2 + 2)
    fig, axes = plt.subplots(len(panels), 1, figsize=(min(width, 18), 3.6 * len(panels)),
                             squeeze=False)
    for ax, (subtitle, series, *more) in zip(axes[:, 0], panels):
        n = max(1, len(series))
        bar = 0.8 / n
        for i, (label, (engine, values)) in enumerate(series.items()):
            xs = [c + (i - (n - 1) / 2) * bar for c in range(len(categories))]
            shown = [(x, v) for x, v in zip(xs, values) if v is not None]
            missing = [x for x, v in zip(xs, values) if v is None]
            ax.bar([x for x, _ in shown], [v for _, v in shown], bar, label=label,
                   color=COLORS.get(engine))
            if missing:
                ax.plot(missing, [0] * len(missing), "x", color=COLORS.get(engine),
                        markersize=5, clip_on=False)
            if len(more) > 1 and more[1] == "symlog":  # a count of 0 has no bar: say it
                for x, v in shown:
                    if v == 0:
                        ax.text(x, 0.05, "0", ha="center", va="bottom", fontsize=7,
                                color=COLORS.get(engine))
        if reference_line is not None:
            ax.axhline(reference_line, color="grey", linewidth=0.8, linestyle="--")
            ax.set_ylim(top=max(ax.get_ylim()[1], reference_line * 1.1))
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels(categories, rotation=45 if len(categories) > 8 else 0, ha="center")
        ax.set_title(subtitle, fontsize=10)
        ax.set_ylabel(more[0] if more else ylabel)
        if len(more) > 1 and more[1] == "symlog":
            top = max([v for _, values in series.values() for v in values if v] or [1])
            ax.set_yscale("symlog", linthresh=1)
            ax.set_ylim(0, top * 3)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    # from the series, not the bars: a series with no bar at all still shows its own colour
    handles = [Patch(color=COLORS.get(engine), label=label)
               for label, (engine, _) in panels[0][1].items()]
    labels = [h.get_label() for h in handles]
    fig.legend(handles, labels, fontsize=8, ncol=len(labels), loc="upper center",
               bbox_to_anchor=(0.5, 0.955), frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def time_chart(path, title, results, engines):
    """Hot and cold seconds per query per engine; results: {query: {engine name: Outcome}}."""
    panels = [(f"{kind}, seconds (lower is better)",
               {e.label: (e.name, [outcomes[e.name].time(kind) for outcomes in results.values()])
                for e in engines})
              for kind in ("hot", "cold")]
    grouped_bars(path, title, list(results), panels, "seconds")
