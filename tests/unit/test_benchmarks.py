"""The CPU benchmarks run in --quick mode, so they cannot rot (timings are not asserted)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_validator_cost_quick(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "validator_cost.py"), "--quick"],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads((ROOT / "results" / "validator_cost.json").read_text())
    assert result["repetitions"] == 3
    assert result["validator_ms"] > 0 and result["sglang_resolution_ms"] > 0
