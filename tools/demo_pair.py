"""Build the demo's tiny pair and ship it in the package: ``python -m tools.demo_pair [--check]``.

``sglang-eagle3-embed demo`` runs on the default CPU pair (``PairSpec()``: a 7-layer DeepSeek-V3
target and its draft on ``[-1, 2, 4]``). Training it would take most of the demo's time, so the pair
ships as package data in ``sglang_eagle3_embed/doctor/data/demo_pair/``: one folder per cache key,
exactly as :func:`~sglang_eagle3_embed.doctor.pair.build_pair` writes them (manifests, and the draft's
record of the target build it was trained on, included), and ``built_with.json`` (torch version, CPU
vendor and capability, torch threads). The demo uses it while its keys
match ``PairSpec()`` and its manifests vouch for its files
(:func:`~sglang_eagle3_embed.doctor.pair.shipped_pair`); otherwise it trains the pair into the cache.

The pair is trained on the CPU on ``pair.TRAIN_THREADS`` (one) torch thread, whatever the machine
has: ``build_pair`` sets it, because CPU training's float sums round differently with the thread
count and a cache key does not name the thread count. At that thread count a build is
bit-reproducible on one kind of CPU with one torch version (``built_with.json``). The vendor counts
apart from the capability: torch's BLAS (MKL) picks its kernels by vendor, and an AMD CPU with
AVX-512 trains other bytes than an Intel one; 400 training steps turn that rounding into other
weights, so only a same-environment build is compared, byte for byte. ``--check`` and
``tests/integration/doctor/test_demo_pair.py`` build the pair afresh and compare every byte.

Run it, and commit the folder, whenever the pair's spec, its training or a folder's format changes:
the test fails until then (a changed key alone would leave the shipped folders unused, and the demo
training again).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from sglang_eagle3_embed.doctor.pair import SHIPPED, TRAIN_THREADS, Pair, PairSpec, build_pair

__all__ = ["BUILT_WITH", "build_environment", "cpu_vendor", "differences", "export", "main"]

BUILT_WITH = "built_with.json"


def cpu_vendor() -> str:
    """The CPU's vendor as Linux names it (``GenuineIntel``, ``AuthenticAMD``), else ``unknown``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def build_environment() -> dict:
    """What a CPU build's bytes depend on besides the spec."""
    import torch

    return {
        "torch": torch.__version__,
        "cpu_vendor": cpu_vendor(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": TRAIN_THREADS,
    }


def export(out: Path = SHIPPED, cache_dir: Path | None = None) -> Pair:
    """Build ``PairSpec()`` into ``cache_dir`` (a fresh temporary folder by default, so that no
    older build is copied) and write its two folders and ``built_with.json`` into ``out``, replacing
    an earlier export's. Returns the pair as written into ``out``."""
    spec = PairSpec()
    with tempfile.TemporaryDirectory(prefix="demo-pair-") as fresh:
        built = build_pair(spec, Path(cache_dir or fresh), device="cpu")
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        for old in out.iterdir():  # an earlier export's folders only
            if old.name == BUILT_WITH:
                old.unlink()
            elif old.is_dir() and old.name.startswith(("target-", "draft-")):
                shutil.rmtree(old)
        for folder in (built.target, built.draft):
            shutil.copytree(folder, out / folder.name)
    (out / BUILT_WITH).write_text(json.dumps(build_environment(), indent=2, sort_keys=True) + "\n")
    return Pair(out / built.target.name, out / built.draft.name, spec)


def differences(a: Path, b: Path) -> list[str]:
    """Every file that differs between the folders ``a`` and ``b``: missing on one side, or other bytes."""
    files_a = {p.relative_to(a) for p in Path(a).rglob("*") if p.is_file()}
    files_b = {p.relative_to(b) for p in Path(b).rglob("*") if p.is_file()}
    found = [f"{name}: only in {a}" for name in sorted(files_a - files_b)]
    found += [f"{name}: only in {b}" for name in sorted(files_b - files_a)]
    found += [
        f"{name}: other bytes"
        for name in sorted(files_a & files_b)
        if (Path(a) / name).read_bytes() != (Path(b) / name).read_bytes()
    ]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.demo_pair", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="build afresh and compare with the shipped pair (exit 1 if it differs)",
    )
    parser.add_argument(
        "--out", type=Path, default=SHIPPED, help=f"where to write the pair (default {SHIPPED})"
    )
    args = parser.parse_args(argv)
    if not args.check:
        pair = export(args.out)
        print(f"wrote {pair.target} and {pair.draft}")
        return 0
    with tempfile.TemporaryDirectory(prefix="demo-pair-check-") as tmp:
        export(Path(tmp) / "demo_pair")
        found = differences(args.out, Path(tmp) / "demo_pair")
    for line in found:
        print(line)
    print("the shipped pair differs from a fresh build" if found else "the shipped pair equals a fresh build")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
