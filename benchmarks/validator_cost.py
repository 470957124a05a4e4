"""What the startup validator costs beyond SGLang's own argument resolution (CPU).

Prints a table and writes results/validator_cost.json. Goal: under 50 ms beyond resolution.

    python benchmarks/validator_cost.py           # 30 repetitions
    python benchmarks/validator_cost.py --quick   # 3 repetitions, for the test suite
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results"


def _median_ms(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _wall_s(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], check=False, capture_output=True)
    return time.perf_counter() - start


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeat = 3 if args.quick else 30

    from sglang.srt.server_args import prepare_server_args

    from sglang_eagle3_embed.rule_examples import Scenario, materialize
    from sglang_eagle3_embed.rules import evaluate
    from sglang_eagle3_embed.validation import snapshot

    argv = [*materialize(Scenario(), tempfile.mkdtemp()), "--device", "cpu"]
    prepare_server_args(argv).resolve_once()  # warm SGLang's lazy imports

    def resolve():
        prepare_server_args(argv).resolve_once()

    resolved = prepare_server_args(argv)
    resolved.resolve_once()

    def validate():
        evaluate(snapshot(resolved, resolved=False, plugin_active=True), "pre")
        evaluate(snapshot(resolved, resolved=True, plugin_active=True), "post")

    result = {
        "repetitions": repeat,
        "sglang_resolution_ms": _median_ms(resolve, repeat),
        "validator_ms": _median_ms(validate, repeat),
        "goal_ms": 50.0,
    }
    if not args.quick:
        result["python_startup_s"] = _wall_s("-c", "pass")
        result["plugin_import_s"] = _wall_s("-c", "import sglang_eagle3_embed.plugin")
        result["check_cli_s"] = _wall_s("-m", "sglang_eagle3_embed.cli", "check", *argv[:-2])
    result["within_goal"] = result["validator_ms"] < result["goal_ms"]

    print(f"{'measure':<28} value")
    print(f"{'SGLang resolution (median)':<28} {result['sglang_resolution_ms']:.1f} ms")
    print(f"{'validator pre+post (median)':<28} {result['validator_ms']:.1f} ms (goal < 50 ms)")
    for key in ("python_startup_s", "plugin_import_s", "check_cli_s"):
        if key in result:
            print(f"{key:<28} {result[key]:.2f} s")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "validator_cost.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
