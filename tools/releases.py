"""Run the tests that run SGLang's code (marked ``releases``) against older supported releases.

The marker is measured, not chosen by hand: the CPU suite fails a test that runs SGLang's code
without it (``tests/support/sglang_touch.py``), so no version-sensitive test of tests/unit or
tests/integration is left out here.

    python -m tools.releases                 # every supported release but the installed one
    python -m tools.releases 0.5.21          # one

Each release's wheel is installed without its dependencies into ``.releases/<version>`` (once) and
put first on ``PYTHONPATH``, over the environment the project installed (the newest release with its
dependencies). The marked tests then run against that release's Python code: its argument
resolution, plugin loading, model code and the plugin's hooks into them. What stays from the
environment is torch and transformers: 0.5.22 pins the same as 0.5.23 (torch 2.14.1, transformers
5.19.0); 0.5.21 pins torch 2.13.0 and transformers 5.12.1, and runs here on the newer pair, on the CPU
code paths only (the tests compare SGLang's forward with HF's in the same environment). CUDA kernels
of the older releases are not exercised: the GPU suite runs on 0.5.23.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sglang_eagle3_embed.core.releases import SUPPORTED, installed_sglang_version

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".releases"
PAIR_CACHE = "EAGLE3_EMBED_TEST_PAIR_CACHE"
"""Where the tests' tiny pairs are built and found (``tests/conftest.py``)."""
FORWARD_EXAMPLES = "50"  # the forward property test's examples per older release (200 on the newest)


def overlay(version: str) -> Path:
    """``.releases/<version>``: the release's wheel, without dependencies (installed once)."""
    target = CACHE / version
    if not (target / f"sglang-{version}.dist-info").is_dir():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
             "--target", str(target), f"sglang=={version}"],
            check=True,
        )  # fmt: skip
    return target


def run(version: str, extra: list[str], pair_cache: Path) -> int:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(overlay(version)), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        "TORCHDYNAMO_DISABLE": "1",
        "EAGLE3_EMBED_FORWARD_EXAMPLES": os.environ.get("EAGLE3_EMBED_FORWARD_EXAMPLES", FORWARD_EXAMPLES),
        PAIR_CACHE: str(pair_cache),
        "EAGLE3_EMBED_SGLANG_TOUCH": "0",  # the tests are chosen: the main run measured them
    }
    check = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m; print(m.version('sglang'))"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    if check.stdout.strip() != version:
        sys.exit(f"the overlay of {version} reads as sglang {check.stdout.strip()}")
    print(f"== SGLang {version}: the tests marked `releases`", flush=True)
    command = [
        sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadscope", "-m", "releases", "-q", "tests/unit", "tests/integration", *extra,
    ]  # fmt: skip
    return subprocess.run(command, env=env, cwd=ROOT, check=False).returncode


def main(argv: list[str]) -> int:
    versions = [a for a in argv if not a.startswith("-")] or [
        v for v in SUPPORTED if v != installed_sglang_version()
    ]
    unknown = sorted(set(versions) - set(SUPPORTED))
    if unknown:
        sys.exit(f"not a supported release: {unknown} (supported: {', '.join(SUPPORTED)})")
    # the tiny CPU pairs are built once for every release (torch trains them, not SGLang), in a
    # folder of this run only, or the one the caller's test run of this checkout built them in
    # (.ci/run names it for both): a pair built by an older checkout is never reused
    shared = os.environ.get(PAIR_CACHE)
    pair_cache = Path(shared) if shared else Path(tempfile.mkdtemp(prefix="releases-pairs-"))
    try:
        codes = {v: run(v, [a for a in argv if a.startswith("-")], pair_cache) for v in versions}
    finally:
        if not shared:
            shutil.rmtree(pair_cache, ignore_errors=True)
    for version, code in codes.items():
        print(f"SGLang {version}: {'passed' if code == 0 else f'FAILED (pytest exit {code})'}")
    return 0 if all(code == 0 for code in codes.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
