"""Compare bench_gpu.py runs of two package trees: baseline-N/ against new-N/ in one output folder.

Reads DIR/baseline-*/bench_gpu.json and DIR/new-*/bench_gpu.json (as bench/compare_gpu.sh
writes them), takes the median over rounds of jiter_magic's figure in each case, and prints
a markdown table (case, baseline, new, new / baseline); also the host-cost profiles
(DIR/profile-baseline.txt, DIR/profile-new.txt) and the GPU test summary when present.
Writes the same markdown to DIR/compare.md (or --md).

Usage: python3 bench/compare_results.py DIR [--md PATH]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import sys
import xml.etree.ElementTree as ET

SIDES = ("baseline", "new")
# bench_gpu.json latency keys: (label, unit, factor from the stored seconds or microseconds)
LATENCY_UNITS = {"host_us": ("us", 1.0), "_s": ("ms", 1e3)}


def load_runs(folder: str, side: str) -> list[tuple[str, dict]]:
    """(run name, parsed JSON) of every side-N run that wrote its JSON, in round order."""
    runs = []
    for path in glob.glob(os.path.join(folder, f"{side}-*", "bench_gpu.json")):
        name = os.path.basename(os.path.dirname(path))
        suffix = name[len(side) + 1:]
        try:
            with open(path) as handle:
                data = json.load(handle)
        except (OSError, ValueError) as exc:
            print(f"warning: skipping {path}: {exc}", file=sys.stderr)
            continue
        runs.append((int(suffix) if suffix.isdigit() else 1 << 30, name, data))
    return [(name, data) for _, name, data in sorted(runs, key=lambda r: (r[0], r[1]))]


def _unit(key: str) -> tuple[str, float]:
    if key.startswith("host_us"):
        return LATENCY_UNITS["host_us"]
    return LATENCY_UNITS["_s"]


def metrics(data: dict) -> dict[str, dict]:
    """Every figure of one run: {metric: {"unit", "better", "ours", "control"}}.

    "ours" is jiter_magic's figure; "control" is torch's native op (else torch's jiterator),
    measured in the same process, so its new/baseline ratio shows the run-to-run noise."""
    result: dict[str, dict] = {}
    for key, value in (data.get("ceiling") or {}).items():
        result[f"ceiling: {key.replace('_GBps', '')}"] = {"unit": "GB/s", "better": "higher", "ours": None,
                                                          "control": value}
    for row in data.get("rows") or []:
        control = row.get("torch_native")
        if control is None:
            control = row.get("torch_jiterator")
        result[row["case"]] = {"unit": "GB/s", "better": "higher", "ours": row.get("jiter_magic"), "control": control}
    for key, values in (data.get("latency") or {}).items():
        unit, factor = _unit(key)

        def scale(v, factor=factor):
            return None if v is None else v * factor

        control = values.get("torch_native", values.get("torch_jiterator"))
        result[key] = {"unit": unit, "better": "lower", "ours": scale(values.get("jiter_magic")),
                       "control": scale(control)}
    return result


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return ""
    if unit == "GB/s":
        return f"{value:.0f}"
    if unit == "us":
        return f"{value:.2f}"
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _ratio(new: float | None, base: float | None) -> str:
    return f"{new / base:.3f}" if new is not None and base else ""


def bench_table(folder: str) -> list[str]:
    runs = {side: load_runs(folder, side) for side in SIDES}
    lines = [f"Runs: baseline {', '.join(n for n, _ in runs['baseline']) or 'none'}; "
             f"new {', '.join(n for n, _ in runs['new']) or 'none'}. "
             "Each cell: median over runs of jiter_magic's figure (GB/s: higher is better; us/ms: lower is better). "
             "Control: torch's own op (native, else jiterator) timed in the same runs; its new/baseline ratio is "
             "the noise between runs.", ""]
    if not runs["baseline"] and not runs["new"]:
        return lines + ["No bench_gpu.json found under " + folder]
    per_side: dict[str, list[dict]] = {side: [metrics(data) for _, data in runs[side]] for side in SIDES}
    order: list[str] = []
    for side in SIDES:
        for m in per_side[side]:
            order += [k for k in m if k not in order]
    lines += ["| case | unit | baseline | new | new / baseline | baseline runs | new runs | control new / baseline |",
              "| --- | --- | ---: | ---: | ---: | --- | --- | ---: |"]
    for key in order:
        info = next(m[key] for side in SIDES for m in per_side[side] if key in m)
        unit = info["unit"]
        ours = {side: [m[key]["ours"] for m in per_side[side] if key in m] for side in SIDES}
        control = {side: [m[key]["control"] for m in per_side[side] if key in m] for side in SIDES}
        base, new = _median(ours["baseline"]), _median(ours["new"])
        cbase, cnew = _median(control["baseline"]), _median(control["new"])
        rounds = {side: ", ".join(_fmt(v, unit) or "-" for v in ours[side]) for side in SIDES}
        if base is None and new is None:  # a ceiling row: only the control figure exists
            rounds = {side: ", ".join(_fmt(v, unit) or "-" for v in control[side]) for side in SIDES}
        lines.append(f"| {key} | {unit} | {_fmt(base, unit)} | {_fmt(new, unit)} | {_ratio(new, base)} | "
                     f"{rounds['baseline']} | {rounds['new']} | {_ratio(cnew, cbase)} |")
    return lines


PROFILE_LINE = re.compile(r"^(?P<name>\S.*?)\s+(?P<us>-?[0-9.]+(?:e[-+]?\d+)?|nan|inf) us\s*$")


def read_profile(path: str) -> dict[str, float] | None:
    if not os.path.exists(path):
        return None
    rows = {}
    with open(path, errors="replace") as handle:
        for line in handle:
            match = PROFILE_LINE.match(line.rstrip("\n"))
            if match and not line.startswith("#"):
                rows[match["name"].strip()] = float(match["us"])
    return rows


def profile_table(folder: str) -> list[str]:
    profiles = {side: read_profile(os.path.join(folder, f"profile-{side}.txt")) for side in SIDES}
    if all(p is None for p in profiles.values()):
        return []
    lines = ["", "Host cost of one call, bench/profile_host.py (us, best of 3 loops of 20000; lower is better):", "",
             "| step | baseline us | new us | new / baseline |", "| --- | ---: | ---: | ---: |"]
    names: list[str] = []
    for p in profiles.values():
        names += [n for n in (p or {}) if n not in names]
    for name in names:
        base, new = (profiles[s].get(name) if profiles[s] else None for s in SIDES)
        lines.append(f"| {name} | {_fmt(base, 'us')} | {_fmt(new, 'us')} | {_ratio(new, base)} |")
    for side in SIDES:
        if profiles[side] is not None and not profiles[side]:
            lines.append(f"\n(profile-{side}.txt has no timings: see the file for its error)")
    return lines


def tests_summary(folder: str) -> list[str]:
    lines = []
    junit = os.path.join(folder, "gpu-junit.xml")
    if os.path.exists(junit):
        try:
            root = ET.parse(junit).getroot()
            suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
            total = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
            seconds = sum(float(s.get("time", 0)) for s in suites)
            lines.append(f"GPU tests of the new tree (junit): {total['tests']} tests, {total['failures']} failures, "
                         f"{total['errors']} errors, {total['skipped']} skipped, {seconds:.0f} s")
        except (ET.ParseError, ValueError) as exc:
            lines.append(f"GPU tests: could not read {junit}: {exc}")
    log = os.path.join(folder, "gpu-tests.log")
    if os.path.exists(log):
        with open(log, errors="replace") as handle:
            tail = [line.strip() for line in handle if line.strip()]
        if tail:
            lines.append(f"GPU tests, last line of gpu-tests.log: {tail[-1]}")
    if not lines:
        lines.append("GPU tests: no gpu-junit.xml or gpu-tests.log (not run, or killed)")
    return ["", *lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=os.environ.get("OUT", "."))
    parser.add_argument("--md", default=None, help="where to write the markdown (default FOLDER/compare.md)")
    args = parser.parse_args()
    lines = [f"# jiter_magic: baseline ({os.environ.get('BASELINE_REV', '2b01290')}) against the working tree, "
             "one GPU, one device call", ""]
    env = os.path.join(args.folder, "env.txt")
    if os.path.exists(env):
        with open(env, errors="replace") as handle:
            lines += ["```", *[line.rstrip("\n") for line in handle], "```", ""]
    lines += bench_table(args.folder) + profile_table(args.folder) + tests_summary(args.folder)
    text = "\n".join(lines) + "\n"
    with open(args.md or os.path.join(args.folder, "compare.md"), "w") as handle:
        handle.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
