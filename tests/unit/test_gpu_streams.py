"""tools/gpu_streams.sh: commands side by side, each pinned to its GPUs, stopped at the time limit."""

import os
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu_streams.sh"


def test_streams_run_pinned_with_their_own_logs_and_stop_at_the_limit(tmp_path):
    run = subprocess.run(
        ["bash", str(SCRIPT), "3", '0|echo "gpus $CUDA_VISIBLE_DEVICES logs $EAGLE3_EMBED_GPU_LOGS"; echo "1 passed"',
         "1,2|sleep 30"],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "STREAM_LOGS": str(tmp_path)}, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "stream 0 [GPUs 0] exit 0" in run.stdout
    assert "stream 1 [GPUs 1,2] exit 124" in run.stdout  # stopped by the limit
    assert (tmp_path / "s0" / "out.txt").read_text().startswith(f"gpus 0 logs {tmp_path}/s0\n")
    assert "1 passed" in run.stdout  # the summary lines of each stream


def test_without_streams_it_prints_its_usage():
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    assert run.returncode == 2 and "LIMIT_S" in run.stdout


FAKE_ENGINE = """
import subprocess, sys, time
worker = subprocess.Popen(["bash", "-c", "exec -a sglang::detokenizer sleep 300"])
open(sys.argv[1], "w").write(str(worker.pid))
time.sleep(300)
"""


def test_a_stopped_stream_leaves_no_engine_worker_behind(tmp_path):
    """An engine's session is killed whole: its renamed SGLang workers too (one left behind held a
    DP-attention port and broke the next command's engines)."""
    engine = tmp_path / "tests" / "gpu" / "engine_run.py"
    engine.parent.mkdir(parents=True)
    engine.write_text(FAKE_ENGINE)
    pid_file = tmp_path / "worker.pid"
    run = subprocess.run(
        ["bash", str(SCRIPT), "3", f"0|setsid python3 {engine} {pid_file} & sleep 30"],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "STREAM_LOGS": str(tmp_path)}, timeout=60,
    )  # fmt: skip
    assert "stream 0 [GPUs 0] exit 124" in run.stdout, run.stdout + run.stderr
    worker = int(pid_file.read_text())
    for _ in range(50):  # killed: gone once its parent (killed too) no longer holds it as a zombie
        if (
            not os.path.exists(f"/proc/{worker}")
            or "Z" in Path(f"/proc/{worker}/stat").read_text().split()[2]
        ):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the engine's worker {worker} still runs")
