"""What the benchmark scripts share: arguments, the results folder, interleaved repetitions,
medians, the run's environment, JSON and Markdown output, and plots (matplotlib, Agg backend).

Each script answers one question, prints a short Markdown table and writes
``<name>.json`` and ``<name>.png`` into ``--results`` (default: the git-ignored ``results/``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.environment import environment

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"


def parser(doc: str) -> argparse.ArgumentParser:
    """An argument parser with the options every script takes (``doc``: the script's docstring)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few repetitions: a CPU smoke run for the tests")
    p.add_argument("--results", type=Path, default=RESULTS, help="folder for <name>.json and <name>.png")
    p.add_argument(
        "--threads", type=int, help="torch CPU threads (default: torch's); 1 is steadiest on a shared machine"
    )
    return p


def gpu_parser(doc: str, logs: str, rounds: int | None = None) -> argparse.ArgumentParser:
    """:func:`parser` with what the GPU-only scripts share: ``--logs`` (server logs, scratch
    files), ``--from-json`` (render a saved result) and, with a default, ``--rounds``."""
    p = parser(doc)
    p.add_argument("--logs", type=Path, default=Path(logs), help="server logs and scratch files")
    p.add_argument("--from-json", type=Path, help="render a saved result (no GPU)")
    if rounds is not None:
        p.add_argument("--rounds", type=int, default=rounds, help="timed rounds")
    return p


def apply_threads(args) -> None:
    if getattr(args, "threads", None):
        import torch

        torch.set_num_threads(args.threads)


def interleaved(runs: Mapping[str, Callable[[], object]], repeat: int, warmup: int = 1) -> dict[str, list]:
    """Call every run once per round, A B C, A B C, ..., the first run rotating from round to round,
    so that the drifts of a shared, noisy machine hit every run alike. ``warmup`` rounds are
    discarded. Returns each run's results in call order."""
    names = list(runs)
    out: dict[str, list] = {name: [] for name in names}
    for round_ in range(warmup + repeat):
        k = round_ % len(names)
        for name in names[k:] + names[:k]:
            value = runs[name]()
            if round_ >= warmup:
                out[name].append(value)
    return out


def stats(samples: Sequence[float]) -> dict:
    """Median and quartiles of ``samples`` (the quartiles equal the median below 2 samples)."""
    values = sorted(float(s) for s in samples)
    if len(values) >= 2:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    else:
        q1 = q3 = values[0]
    return {"median": statistics.median(values), "q1": q1, "q3": q3, "n": len(values)}


def pair_folders(target: Path | None, draft: Path | None, *, gpu: bool, device: str) -> tuple[Path, Path]:
    """The folders given, else the tiny pair (GPU-sized when ``gpu``), found in or built into the cache."""
    if target and draft:
        return target, draft
    from sglang_eagle3_embed.doctor.pair import GPU_PAIR, PairSpec, build_pair

    pair = build_pair(GPU_PAIR if gpu else PairSpec(), device=device)
    return pair.target, pair.draft


def last_error_line(log: str, default: str) -> str:
    """The last line of an engine log that names an error (SGLang's own message), else ``default``."""
    errors = [line for line in log.splitlines() if "Error" in line]
    return errors[-1].strip() if errors else default


def saved_or_gpu(p, args, script: str) -> dict | None:
    """For a GPU-only script with ``--from-json``: the saved result to render, or None once a
    measurement may start (``--quick`` only renders; no GPU is a clear exit)."""
    if args.from_json:
        return json.loads(args.from_json.read_text())
    if args.quick:
        p.error(f"{script} measures on a GPU only; --quick renders a result given with --from-json")
    require_cuda(script)
    return None


def require_cuda(what: str, hint: str = "or render a result it wrote with --from-json RESULT.json") -> None:
    """Exit with a clear message when no CUDA device is present."""
    import torch

    if not torch.cuda.is_available():
        sys.exit(
            f"{what} needs a CUDA GPU (and SGLang 0.5.23's GPU build), and torch sees none here. "
            f"Run it on the GPU machine (benchmarks/gpu_all.py runs every GPU benchmark), {hint}."
        )


def write_json(results: Path, name: str, result: Mapping) -> Path:
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, default=str))
    return path


def publish(args, name: str, result: dict, plot, table, *, measured_on: str | None) -> dict:
    """Stamp a fresh measurement (``measured_on``: its device; None for a rendered result) with its
    environment and write ``<name>.json``; then print the table and write the plot (the table
    first: a GPU machine without matplotlib still shows it)."""
    if measured_on is not None:
        result["env"] = environment(measured_on)
        write_json(args.results, name, result)
    print(table(result), flush=True)
    plot(result, args.results)
    return result


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if c is None else str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def ticker():
    """matplotlib's tick formatters."""
    import matplotlib.ticker

    return matplotlib.ticker


def log2_axes(labelled, xlabel: str, ticks=None) -> None:
    """Shared look of the two-panel figures: ``labelled`` is ``[(axes, y label), ...]``, x on a
    log-2 scale (ticks at ``ticks`` when given), a light grid."""
    for ax, ylabel in labelled:
        ax.set_xscale("log", base=2)
        if ticks:
            ax.set_xticks(list(ticks), [str(t) for t in ticks])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)


def save_figure(fig, results: Path, name: str) -> Path:
    """Write ``<name>.png`` (small: 100 dpi, a few tens of KB)."""
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    pyplot().close(fig)
    return path


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def ratio(value: float | None) -> str:
    """A ratio as the tables write it ("-" where there is none, as where no baseline was measured)."""
    return "-" if value is None else f"{value:.2f}x"
