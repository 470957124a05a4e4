"""tools/gpu_streams.sh: commands side by side, each pinned to its GPUs, stopped at the time limit."""

import subprocess
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
