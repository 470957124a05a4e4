"""``sglang-eagle3-embed demo`` as a user runs it: a subprocess on CPU, plain words, both wirings and
both predicted accept lengths, SGLang's own startup failure, no stack trace and nothing on stderr
(no library chatter), ending with the serve command. On the pair shipped with the package: an
empty cache stays empty."""

import os
import re
import subprocess
import sys

import pytest


@pytest.mark.releases
def test_demo_names_both_wirings_and_accept_lengths(tmp_path):
    env = {**os.environ, "TORCHDYNAMO_DISABLE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "sglang_eagle3_embed.cli", "demo", "--cache", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "Traceback" not in out + done.stderr
    assert done.stderr == ""
    assert out.rstrip().endswith("--model-impl sglang_eagle3_embed")
    assert list(tmp_path.iterdir()) == []  # the shipped pair: nothing trained, nothing cached
    assert "RuntimeError: captured 2 of 3 aux hidden states" in out  # SGLang's own packer
    assert "[output of layer 1, output of layer 2, output of layer 3]" in out  # stock's defaults
    assert out.count("captures [embedding output, output of layer 2, output of layer 4]") == 2
    stock = float(re.search(r"or accept length ([\d.]+) \(top-level ids\)", out).group(1))
    plugin = float(re.search(r"plugin       : accept length ([\d.]+)", out).group(1))
    assert plugin >= stock + 2.0, out
