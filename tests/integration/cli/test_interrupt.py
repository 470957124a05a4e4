"""Ctrl-C on a real command, as a subprocess: SIGINT to ``pair`` while it works ends it with one line
on stderr and exit 130, never a traceback."""

import os
import signal
import subprocess
import sys
import time

from tests.support import ROOT


def test_sigint_during_pair_exits_130_with_one_line(tmp_path):
    # a size that ships with no pair: the command imports torch and trains until interrupted
    proc = subprocess.Popen(
        [sys.executable, "-m", "sglang_eagle3_embed.cli", "pair", "--layers", "8", "--cache", str(tmp_path)],
        cwd=ROOT, env={**os.environ, "TORCHDYNAMO_DISABLE": "1"}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        time.sleep(3)  # past the interpreter's start: main() runs (importing torch, or training)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.splitlines()[-1] == "sglang-eagle3-embed: pair: interrupted"
    assert out == ""
