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


def test_acceptance_table_from_logs(tmp_path):
    """The issue-#5 table reads engine results and the offline prediction; missing runs say so."""
    (tmp_path / "offline.json").write_text(json.dumps({"3": {"0,5,11": 3.05, "2,8,13": 1.39}}))
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    (first / "offline.json").write_text(json.dumps({"3": {"0,5,11": 3.05, "2,8,13": 1.39}}))
    run = {"accept_length": [3.0, 3.4], "tokens_per_s": 155.7}
    single = {"accept_length": [3.0], "tokens_per_s": 80.5}
    meta = {"ok": True, "gpu": "NVIDIA H200", "sglang": "0.5.23"}
    (first / "plugin-steps3-topk1.json").write_text(
        json.dumps({**meta, "modes": {"all": {**run, "tokens_per_s": 1}}})
    )
    (second / "plugin-steps3-topk1.json").write_text(
        json.dumps({**meta, "modes": {"all": run, "one-by-one": single}})
    )
    (first / "stock-nested.log").write_text("[x] loading\n[y] RuntimeError: captured 2 of 3\n[z] killed\n")
    (second / "stock-top-level.json").write_text(json.dumps({"ok": False, "error": "no result after 300 s"}))
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "acceptance_table.py"), str(first), str(second)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "NVIDIA H200, SGLang 0.5.23" in out
    assert "| plugin, steps 3, top-k 1 | 3.20 | 3.05 | 155.7 | 80.5 |" in out  # the later folder wins
    assert "| stock, nested ids | fails: [y] RuntimeError: captured 2 of 3 |  | | |" in out
    assert "| stock, top-level ids (serves its defaults) | fails: no result after 300 s | 1.39 | | |" in out
    assert "| no speculation | not run | | | |" in out
