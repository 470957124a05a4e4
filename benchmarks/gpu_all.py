"""The GPU benchmarks in one command on one H200: capture overhead, then speculation speedup.

    python -m benchmarks.gpu_all --results $OUT    # the pair cached: minutes, not hours
    python -m benchmarks.gpu_all --dry-run          # the plan; needs no GPU

Steps, each a subprocess with a time limit (killed with everything it started when over it):

1. check that a CUDA device is present and that SGLang would load the plugin (its entry point);
2. find or build the GPU-sized tiny pair (``sglang-eagle3-embed pair --size gpu --device cuda``;
   cached in ``$SGLANG_EAGLE3_EMBED_CACHE``: a cache built beforehand, even on a CPU, and copied to
   the GPU machine saves its minutes here);
3. ``capture_overhead.py --device cuda``: an SGLang ModelRunner per capture and target, started
   together, timed in turn;
4. ``speedup.py``: the ``launch_server`` processes of ``configs.SPEEDUP`` side by side, timed in turn
   by SGLang's client;
5. render both from their JSON (partial results too, if a step ran out of time), print the tables,
   and pack every log into ``<results>/logs.tar.gz``.

``<results>`` then holds five files: the two JSON results, their plots and ``logs.tar.gz``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from benchmarks import _common as c

STEPS = ("capture", "speedup")


def arguments():
    p = c.parser(__doc__)
    p.add_argument("--logs", type=Path, help="logs and scratch files (default: a new temporary folder)")
    p.add_argument("--only", choices=STEPS, action="append", help="run only this step (repeatable)")
    p.add_argument("--pair-timeout", type=int, default=300, help="seconds for finding or building the pair")
    p.add_argument("--capture-timeout", type=int, default=260)
    p.add_argument("--speedup-timeout", type=int, default=420)
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    args = p.parse_args()
    args.only = args.only or list(STEPS)
    return args


def plan(args, target="TARGET") -> list[tuple[str, list[str], int]]:
    """(name, command, time limit in s) of each measuring step."""
    py = [sys.executable]
    common = ["--results", str(args.results), "--logs", str(args.logs or "LOGS")]
    steps = []
    if "capture" in args.only:
        command = [*py, "-m", "benchmarks.capture_overhead", "--device", "cuda", "--target", target, *common]
        steps.append(("capture_overhead", command, args.capture_timeout))
    if "speedup" in args.only:
        command = [*py, "-m", "benchmarks.speedup", *common]  # the GPU pair, from the cache
        steps.append(("speedup", command, args.speedup_timeout))
    return steps


def run(name: str, command: list[str], timeout: int, logs: Path) -> dict:
    """Run ``command`` with its output in ``<logs>/<name>.log``; kill its process group past ``timeout``."""
    started = time.time()
    with open(logs / f"{name}.log", "w") as log:
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=c.ROOT
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    status = {"step": name, "seconds": round(time.time() - started, 1), "returncode": code}
    outcome = f"killed after {timeout} s" if code is None else f"exit {code}"
    print(f"{name}: {outcome} ({status['seconds']} s)", flush=True)
    return status


def preflight() -> None:
    c.require_cuda("gpu_all.py", "or see --dry-run for its plan")
    from sglang_eagle3_embed.doctor.check import plugin_status

    active, reason = plugin_status()
    if not active:
        sys.exit(f"SGLang would not load the plugin: {reason}")


def gpu_pair(args) -> tuple[str, str]:
    command = [sys.executable, "-m", "sglang_eagle3_embed.cli", "pair", "--size", "gpu", "--device", "cuda"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.pair_timeout, check=False)
    if done.returncode != 0:
        sys.exit(f"finding or building the GPU pair failed:\n{done.stderr[-3000:]}")
    folders = json.loads(done.stdout.strip().splitlines()[-1])
    return folders["target"], folders["draft"]


def render(args) -> None:
    """Tables and plots from whatever JSON the steps wrote."""
    for name in ("capture_overhead", "speedup"):
        result = args.results / f"{name}.json"
        if result.exists():
            command = [
                sys.executable,
                "-m",
                f"benchmarks.{name}",
                "--from-json",
                str(result),
                "--results",
                str(args.results),
            ]
            table = subprocess.run(command, capture_output=True, text=True, check=False, cwd=c.ROOT)
            print(f"\n## {name}\n\n{table.stdout}{table.stderr[-2000:]}", flush=True)
            (args.logs / f"{name}.md").write_text(table.stdout)


def pack_logs(args) -> Path:
    archive = args.results / "logs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(args.logs.rglob("*")):
            if path.is_file() and path.suffix in (".log", ".md", ".json"):
                tar.add(path, arcname=str(path.relative_to(args.logs)))
    return archive


def main() -> int:
    args = arguments()
    if args.dry_run:
        for name, command, timeout in plan(args):
            print(f"{name} (at most {timeout} s): {' '.join(command)}")
        total = args.pair_timeout + sum(t for *_, t in plan(args))
        print(f"at most {total} s in all, the pair included (seconds when it is cached)")
        return 0
    preflight()
    args.results.mkdir(parents=True, exist_ok=True)
    args.logs = args.logs or Path(tempfile.mkdtemp(prefix="gpu_all-logs-"))
    args.logs.mkdir(parents=True, exist_ok=True)
    started = time.time()
    target, draft = gpu_pair(args)
    statuses = [
        {"step": "pair", "seconds": round(time.time() - started, 1), "target": target, "draft": draft}
    ]
    for name, command, timeout in plan(args, target):
        statuses.append(run(name, command, timeout, args.logs))
    (args.logs / "gpu_all.json").write_text(
        json.dumps({"steps": statuses, "env": c.environment("cuda")}, indent=2)
    )
    render(args)
    print(f"\nlogs: {pack_logs(args)}; {round(time.time() - started)} s in all")
    return 0 if all(s.get("returncode", 0) == 0 for s in statuses) else 1


if __name__ == "__main__":
    sys.exit(main())
