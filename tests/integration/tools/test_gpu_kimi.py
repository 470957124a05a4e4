"""tools/gpu_kimi.sh: the Kimi-K2.5 run over several device calls. Run here on a copy of the
checkout whose bundle script, Marlin prebuild and two benchmarks are stand-ins that record their
arguments: the build runs beside the first server, each server alone with its own concurrencies, in
the order given, told where the build's exit status will be (``real_speedup --building``, which the
stand-in honours as the real one does: nothing served before the build has ended with 0); every call
leaves the results so far in $OUT; a later call follows the job, never starts it twice."""

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.support import ROOT

STAND_INS = {
    # the bundle's environment is not this test's business: run the command as given
    "tools/gpu_bundle.sh": 'shift\nexec "$@"\n',
    "tools/prebuild_marlin.py": "print('built')\n",
    "benchmarks/__init__.py": "",
    "benchmarks/kimi_build.py": (
        "import json, pathlib, sys\n"
        "out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)\n"
        "(out / 'kimi_build.json').write_text(json.dumps({'argv': sys.argv[1:]}))\n"
    ),
    "benchmarks/real_speedup.py": (
        "import json, pathlib, sys, time\n"
        "a = sys.argv[1:]\n"
        "status = pathlib.Path(a[a.index('--building') + 1])\n"
        "(status.parent / ('started-' + a[a.index('--configs') + 1])).touch()\n"
        "while not status.exists(): time.sleep(0.05)\n"
        "if status.read_text().strip() != '0': sys.exit(1)\n"
        "results = pathlib.Path(a[a.index('--results') + 1]); results.mkdir(parents=True, exist_ok=True)\n"
        "(results / (a[a.index('--name') + 1] + '.json')).write_text(json.dumps(a))\n"
        "print('served', a[a.index('--configs') + 1], flush=True)\n"
    ),
}


def checkout(tmp_path):
    """A copy of the checkout's two scripts, the stand-ins beside them, and a bundle folder."""
    src = tmp_path / "checkout"
    for name in ("gpu_kimi.sh", "gpu_follow.sh"):
        (src / "tools").mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "tools" / name, src / "tools" / name)
    for name, text in STAND_INS.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    (src / ".sgl" / "shim").mkdir(parents=True)
    (src / ".sgl" / "shim" / "sitecustomize.py").write_text("")
    (src / ".sgl" / "sglang-0.5.23-gpu-site-cp312.tar.xz").write_text("")
    return src


def call(src, tmp_path, out, *servers, limit=30):
    out.mkdir()
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"  # the stand-ins run on this Python
    env = {"PATH": path, "RUN": str(tmp_path / "run"), "OUT": str(out), "T": str(limit)}
    return subprocess.run(
        ["bash", "tools/gpu_kimi.sh", ".sgl", *servers], cwd=src, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def test_the_build_then_each_server_alone_with_its_concurrencies(tmp_path):
    src = checkout(tmp_path)
    first = call(src, tmp_path, tmp_path / "out1", "no-spec", "plugin-5:1,16")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "kimi: ended, exit 0" in first.stdout
    out = tmp_path / "out1"
    build = json.loads((out / "kimi_build.json").read_text())
    assert build["argv"] == [str(tmp_path / "run" / "kimi"), "--device", "cuda", "--reuse", "--target-beside"]
    plain = json.loads((out / "kimi-no-spec.json").read_text())
    assert plain[plain.index("--concurrency") + 1 : plain.index("--rounds")] == ["1", "4", "16", "64"]
    assert plain[plain.index("--building") + 1] == str(tmp_path / "run" / "built")
    five = json.loads((out / "kimi-plugin-5.json").read_text())
    assert five[five.index("--concurrency") + 1 : five.index("--rounds")] == ["1", "16"]
    assert five[five.index("--pair") + 1] == str(tmp_path / "run" / "kimi")
    log = first.stdout
    assert log.index("served no-spec") < log.index("served plugin-5")
    with tarfile.open(out / "logs.tgz") as logs:
        assert {"kimi.log", "logs/marlin.log"} <= set(logs.getnames())

    # a later call, the checkout copied again: the job is not started twice
    (src / "benchmarks" / "kimi_build.py").write_text("raise SystemExit(9)\n")
    again = call(src, tmp_path, tmp_path / "out2", "no-spec", limit=5)
    assert again.returncode == 0 and "kimi: ended, exit 0" in again.stdout
    assert (tmp_path / "out2" / "kimi-plugin-5.json").exists()


def test_the_first_server_starts_while_the_build_runs(tmp_path):
    """The build ends only once the first server's benchmark has started: run one after the other,
    the build would give up and serve nothing."""
    src = checkout(tmp_path)
    (src / "benchmarks" / "kimi_build.py").write_text(
        "import pathlib, sys, time\n"
        "out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)\n"
        "for _ in range(400):\n"
        "    if (out.parent / 'started-no-spec').exists(): break\n"
        "    time.sleep(0.05)\n"
        "else: raise SystemExit(3)\n"
        "(out / 'kimi_build.json').write_text('{}')\n"
    )
    run = call(src, tmp_path, tmp_path / "out", "no-spec", "plugin-5")
    assert run.returncode == 0 and "kimi: ended, exit 0" in run.stdout, run.stdout + run.stderr
    assert run.stdout.index("served no-spec") < run.stdout.index("served plugin-5")


def test_a_server_that_wrote_nothing_is_served_again_after_the_others(tmp_path):
    src = checkout(tmp_path)
    stand_in = src / "benchmarks" / "real_speedup.py"
    first_try = (
        "import pathlib, sys\n"
        "a = sys.argv[1:]\n"
        "tried = pathlib.Path(a[a.index('--building') + 1]).parent / 'tried'\n"
        "if a[a.index('--configs') + 1] == 'no-spec' and not tried.exists():\n"
        "    tried.touch(); print('no-spec could not start', flush=True); sys.exit(1)\n"
    )
    stand_in.write_text(first_try + stand_in.read_text())
    run = call(src, tmp_path, tmp_path / "out", "no-spec", "plugin-5")
    assert run.returncode == 0, run.stdout + run.stderr
    log = run.stdout
    assert log.index("no-spec could not start") < log.index("served plugin-5") < log.index("served no-spec")
    assert log.count("served no-spec") == 1 and (tmp_path / "out" / "kimi-no-spec.json").exists()


def test_a_failed_build_serves_nothing(tmp_path):
    src = checkout(tmp_path)
    (src / "benchmarks" / "kimi_build.py").write_text("raise SystemExit(9)\n")
    failed = call(src, tmp_path, tmp_path / "out", "no-spec")
    assert failed.returncode == 1 and "kimi: ended, exit 1" in failed.stdout
    assert "served" not in failed.stdout
    assert not list((tmp_path / "out").glob("kimi-*.json"))


def test_usage(tmp_path):
    usage = subprocess.run(["bash", str(ROOT / "tools" / "gpu_kimi.sh")], capture_output=True, text=True)
    assert usage.returncode == 2 and "T=SECONDS bash tools/gpu_kimi.sh BUNDLE_DIR" in usage.stdout
    assert usage.stdout.rstrip().endswith("Exit: gpu_follow.sh's.")  # the whole comment, no code
    assert "set -u" not in usage.stdout
