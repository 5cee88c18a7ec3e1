"""Draw a bench_gpu.json as a PNG: GB/s of each case for each contender, against the ceilings.

Usage: python bench/plot_results.py RESULTS/bench_gpu.json [OUT.png]  (default: beside the JSON)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CONTENDERS = (("jiter_magic", "jiter_magic"), ("torch_jiterator", "torch jiterator"), ("torch_native", "torch native"),
              ("inductor", "Inductor (torch.compile)"), ("cupy", "CuPy ElementwiseKernel"))


def plot(results: dict, path: Path) -> None:
    rows = results["rows"]
    fig, ax = plt.subplots(figsize=(11, 0.42 * len(rows) + 1.8))
    height = 0.8 / len(CONTENDERS)
    for k, (key, label) in enumerate(CONTENDERS):
        values = [row.get(key) or 0.0 for row in rows]
        if any(values):
            ax.barh([i + k * height for i in range(len(rows))], values, height=height, label=label)
    for name, style in (("copy", "--"), ("write", ":")):
        value = results["ceiling"].get(f"{name}_GBps")
        if value:
            ax.axvline(value, color="black", linestyle=style, linewidth=1, label=f"{name} ceiling {value:.0f} GB/s")
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(rows))], [row["case"] for row in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("GB/s (bytes read + written per second)")
    ax.set_title(f"{results['device']}, {results['date']}: elementwise cases against the measured ceilings",
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.06), ncol=3)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    source = Path(sys.argv[1])
    target = Path(sys.argv[2]) if len(sys.argv) > 2 else source.with_suffix(".png")
    plot(json.loads(source.read_text()), target)
    print(target)


if __name__ == "__main__":
    main()
