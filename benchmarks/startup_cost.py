"""Startup cost of the plugin (CPU).

Measured, on one clean EAGLE-3 deployment (the rule examples' base launch, --device cpu):

- SGLang's own argument resolution (``prepare_server_args(argv).resolve_once()``) of the launch
  without ``--model-impl`` against the same launch with ``--model-impl sglang_eagle3_embed`` and the
  plugin loaded (its resolution guard and startup validator run inside it); interleaved repetitions,
  medians; the difference is what the plugin adds (goal: under 50 ms);
- the validator's rules alone (``pre`` + ``post``, including reading the configs);
- ``import sglang_eagle3_embed.plugin`` in a fresh interpreter (in-process timer, repeated), and
  the import and ``register()`` in this process, where SGLang is already imported, as in a launch;
- ``sglang-eagle3-embed check`` wall time (full runs only; SGLang's imports dominate it).

    python -m benchmarks.startup_cost            # 30 repetitions
    python -m benchmarks.startup_cost --quick    # 3 repetitions, no `check` subprocess (test suite)
"""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
import time

from benchmarks import _common as c

NAME = "startup_cost"
GOAL_MS = 50.0
IMPORT_TIMER = (
    "import time; t = time.perf_counter(); import sglang_eagle3_embed.plugin; "
    "print((time.perf_counter() - t) * 1000)"
)


def timed_ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def fresh_import_ms(repeat: int) -> list[float]:
    """``import sglang_eagle3_embed.plugin`` timed inside a new interpreter, ``repeat`` times."""
    runs = [
        subprocess.run([sys.executable, "-c", IMPORT_TIMER], capture_output=True, text=True, check=True)
        for _ in range(repeat)
    ]
    return [float(r.stdout.strip().splitlines()[-1]) for r in runs]


def wall_s(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], check=False, capture_output=True)
    return time.perf_counter() - start


def launches() -> tuple[list[str], list[str]]:
    """The clean deployment with and without ``--model-impl sglang_eagle3_embed``."""
    from harness.rule_examples import Scenario, materialize

    plugin = [*materialize(Scenario(), tempfile.mkdtemp()), "--device", "cpu"]
    at = plugin.index("--model-impl")
    return plugin, plugin[:at] + plugin[at + 2 :]


def measure(repeat: int, with_check: bool) -> dict:
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import prepare_server_args

    logging.disable(logging.WARNING)  # SGLang logs its notes on every resolution; both launches alike

    plugin_argv, stock_argv = launches()
    prepare_server_args(stock_argv).resolve_once()  # warm SGLang's lazy imports before the plugin's
    start = time.perf_counter()
    from sglang_eagle3_embed import plugin

    import_ms = (time.perf_counter() - start) * 1000
    register_ms = timed_ms(plugin.register)
    load_plugins()  # SGLang applies the registered hooks; the plugin is now active in this process
    from sglang_eagle3_embed.core.rules.table import evaluate
    from sglang_eagle3_embed.patch.launch_snapshot import snapshot

    resolved = prepare_server_args(plugin_argv)
    resolved.resolve_once()

    def validate():
        evaluate(snapshot(resolved, resolved=False, plugin_active=True), "pre")
        evaluate(snapshot(resolved, resolved=True, plugin_active=True), "post")

    samples = c.interleaved(
        {
            "stock": lambda: timed_ms(lambda: prepare_server_args(stock_argv).resolve_once()),
            "plugin": lambda: timed_ms(lambda: prepare_server_args(plugin_argv).resolve_once()),
            "rules": lambda: timed_ms(validate),
        },
        repeat,
    )
    result = {
        "repetitions": repeat,
        "goal_ms": GOAL_MS,
        "resolution_stock_ms": c.stats(samples["stock"]),
        "resolution_plugin_ms": c.stats(samples["plugin"]),
        "validator_rules_ms": c.stats(samples["rules"]),
        "plugin_import_fresh_ms": c.stats(fresh_import_ms(repeat)),
        "plugin_import_in_sglang_ms": import_ms,
        "plugin_register_ms": register_ms,
        "check_cli_s": None,
        "python_startup_s": None,
    }
    result["plugin_adds_ms"] = (
        result["resolution_plugin_ms"]["median"] - result["resolution_stock_ms"]["median"]
    )
    result["within_goal"] = result["plugin_adds_ms"] < GOAL_MS
    if with_check:
        result["python_startup_s"] = c.stats([wall_s("-c", "pass") for _ in range(3)])["median"]
        check = ["-m", "sglang_eagle3_embed.cli", "check", *plugin_argv[:-2]]
        result["check_cli_s"] = c.stats([wall_s(*check) for _ in range(3)])["median"]
    return result


def rows(result: dict) -> list[tuple[str, str]]:
    med = {k: v["median"] for k, v in result.items() if isinstance(v, dict) and "median" in v}
    out = [
        ("SGLang argument resolution, stock launch", f"{med['resolution_stock_ms']:.1f} ms"),
        ("same launch with --model-impl sglang_eagle3_embed", f"{med['resolution_plugin_ms']:.1f} ms"),
        ("what the plugin adds (guard + validator)", f"{result['plugin_adds_ms']:.1f} ms (goal < 50 ms)"),
        ("validator rules alone, pre + post", f"{med['validator_rules_ms']:.1f} ms"),
        ("import sglang_eagle3_embed.plugin, fresh interpreter", f"{med['plugin_import_fresh_ms']:.1f} ms"),
        (
            "import + register() in an SGLang process",
            f"{result['plugin_import_in_sglang_ms'] + result['plugin_register_ms']:.1f} ms",
        ),
    ]
    if result.get("check_cli_s") is not None:
        out.append(("`sglang-eagle3-embed check` wall time", f"{result['check_cli_s']:.2f} s"))
        out.append(("python -c pass wall time", f"{result['python_startup_s']:.2f} s"))
    return out


def plot(result: dict, results_dir):
    """Horizontal bars, log scale, with the 50 ms goal for what the plugin adds."""
    plt = c.pyplot()
    bars = [
        ("SGLang resolution (stock)", result["resolution_stock_ms"]["median"]),
        ("resolution with the plugin", result["resolution_plugin_ms"]["median"]),
        ("plugin adds", max(result["plugin_adds_ms"], 0.01)),
        ("validator rules", result["validator_rules_ms"]["median"]),
        ("plugin import (fresh)", result["plugin_import_fresh_ms"]["median"]),
        (
            "import + register (in SGLang)",
            result["plugin_import_in_sglang_ms"] + result["plugin_register_ms"],
        ),
    ]
    if result.get("check_cli_s") is not None:
        bars.append(("`check` wall time", result["check_cli_s"] * 1000))
    fig, ax = plt.subplots(figsize=(7, 3.2))
    labels, values = zip(*bars)
    colors = ["#888888", "#4c72b0", "#dd8452", "#55a868", "#8172b3", "#8172b3", "#937860"][: len(bars)]
    ax.barh(labels, values, color=colors)
    ax.set_xscale("log")
    ax.set_xlim(min(1.0, min(values) / 2), max(*values, GOAL_MS) * 3)
    ax.xaxis.set_major_formatter(c.ticker().FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(c.ticker().NullFormatter())
    ax.axvline(GOAL_MS, color="#c44e52", linestyle="--", label="goal for 'plugin adds': 50 ms")
    for y, v in enumerate(values):
        ax.text(v, y, f" {v:.1f} ms" if v < 1000 else f" {v / 1000:.1f} s", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds (log scale), medians")
    ax.set_title("Startup cost of sglang_eagle3_embed (CPU)", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    return c.save_figure(fig, results_dir, NAME)


def main() -> dict:
    args = c.parser(__doc__).parse_args()
    c.apply_threads(args)
    result = measure(repeat=3 if args.quick else 30, with_check=not args.quick)
    return c.publish(args, NAME, result, plot, table, measured_on="cpu")


def table(result: dict) -> str:
    return c.markdown_table(("measure", "median"), rows(result))


if __name__ == "__main__":
    main()
