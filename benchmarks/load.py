"""Under load and faults: the figures of ``tests/gpu/test_load_faults.py``.

The GPU test serves the GPU pair three ways through ``python -m sglang.launch_server`` (the plugin;
stock SGLang on the same tensors through hand-written indices; the plugin with a planted leak) and
drives each with SGLang's own serving client at concurrency 1, 16, 64 and 256, streaming and not,
two rounds, then with faults (``harness.load_run``). This script runs that test
(on the GPU machine) or renders a run's result: per server and phase of the second round, output tokens/s,
TTFT and TPOT (median and p99), the KV tokens in use once idle and the GPU's free memory; and each
fault's answer, side by side.

    python -m benchmarks.load --logs /tmp/load                                # on the GPU machine
    python -m benchmarks.load --quick --from-json results/load_faults.json    # render only
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks import _common
from harness.load_run import SERVERS

NAME = "load_faults"


def load_table(result: dict) -> str:
    rows = []
    for name, label in SERVERS.items():
        for p in result["servers"].get(name, {}).get("phases", []):
            if p["round"] != 2:
                continue
            if "error" in p:
                rows.append(
                    [label, p["concurrency"], "yes" if p["stream"] else "no", f"fails: {p['error'][:80]}"]
                )
                continue
            rows.append([
                label, p["concurrency"], "yes" if p["stream"] else "no", p["completed"],
                f"{p['output_throughput']:.0f}", f"{p['median_ttft_ms']:.1f} / {p['p99_ttft_ms']:.1f}",
                f"{p['median_tpot_ms']:.2f} / {p['p99_tpot_ms']:.2f}" if p["stream"] else "-",  # whole: no TPOT
                p["num_used_tokens"], f"{p['free_mb']:.0f}",
            ])  # fmt: skip
    header = ["server", "concurrency", "stream", "completed", "output tokens/s", "TTFT ms p50 / p99",
              "TPOT ms p50 / p99", "KV tokens in use after", "GPU free MiB after"]  # fmt: skip
    return _common.markdown_table(header, rows)


def fault_table(result: dict) -> str:
    servers = {n: s for n, s in result["servers"].items() if s.get("faults")}
    cases = list(next(iter(servers.values()))["faults"]) if servers else []

    def cell(found: dict) -> str:
        shown = {k: v for k, v in found.items() if k not in ("after", "message")}
        return (
            ", ".join(f"{k} {v}" for k, v in shown.items())
            + f"; KV after {found['after']['num_used_tokens']}"
        )

    rows = [[case, *(cell(s["faults"][case]) for s in servers.values())] for case in cases]
    rows.append(
        ["same tokens before and after", *("yes" if s["same_outputs"] else "NO" for s in servers.values())]
    )
    return _common.markdown_table(["fault", *(SERVERS.get(n, n) for n in servers)], rows)


def render(result: dict) -> str:
    return "\n\n".join([load_table(result), fault_table(result)])


def plot(result: dict, results_dir: Path) -> Path:
    """Round 2, streaming: output tokens/s and p99 TPOT against concurrency; and the GPU's free
    memory after each phase of both rounds, where a leak shows as a fall."""
    plt = _common.pyplot()
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(12, 3.4))
    for name, label in SERVERS.items():
        phases = [p for p in result["servers"].get(name, {}).get("phases", []) if "error" not in p]
        warm = [p for p in phases if p["round"] == 2 and p["stream"]]
        if warm:
            levels = [p["concurrency"] for p in warm]
            left.plot(levels, [p["output_throughput"] for p in warm], marker="o", label=label)
            middle.plot(levels, [p["p99_tpot_ms"] for p in warm], marker="o", label=label)
        if phases:
            base = phases[0]["free_mb"]
            right.plot(
                range(1, len(phases) + 1), [p["free_mb"] - base for p in phases], marker=".", label=label
            )
    levels = sorted({p["concurrency"] for s in result["servers"].values() for p in s.get("phases", [])})
    panels = [(left, "output tokens/s"), (middle, "p99 TPOT (ms)")]
    _common.log2_axes(panels, "concurrency (streaming, round 2)", levels)
    right.set_xlabel("load phase (8 per round)")
    right.set_ylabel("GPU free memory vs first phase (MiB)")
    right.grid(alpha=0.3)
    for ax in (left, middle, right):
        ax.legend(fontsize=7)
    env = result.get("env", {})
    fig.suptitle(
        f"SGLang's serving client under load: {env.get('gpu', 'GPU')}, {env.get('date', '')}", fontsize=10
    )
    return _common.save_figure(fig, results_dir, NAME)


def measure(args) -> dict:
    """The GPU test, with its logs in ``--logs``; its result is what the test wrote there (with
    the run's environment)."""
    args.logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "EAGLE3_EMBED_GPU_LOGS": str(args.logs)}
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-v", "-rA", "-p", "no:cacheprovider",
               "-o", "testpaths=tests/gpu", "tests/gpu/test_load_faults.py"]  # fmt: skip
    subprocess.run(command, env=env, cwd=_common.ROOT, check=False)
    written = args.logs / f"{NAME}.json"
    if not written.exists():
        sys.exit(f"the GPU test wrote no {written}: its output above says why")
    return json.loads(written.read_text())


def main() -> dict:
    p = _common.gpu_parser(__doc__, logs="/tmp/load")
    args = p.parse_args()
    result = _common.saved_or_gpu(p, args, "load.py")
    if result is None:
        result = measure(args)
        _common.write_json(args.results, NAME, result)
    return _common.publish(args, NAME, result, plot, render, measured_on=None)


if __name__ == "__main__":
    main()
