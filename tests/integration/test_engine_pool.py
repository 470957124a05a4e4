"""``harness.engine_run.run_pool`` with stand-in engines (no GPU): every engine that ends, timed or
not, releases the timing barrier, so the timed engines never wait for one that is gone."""

import json
import subprocess
import sys

from harness import engine_run


def test_every_finished_engine_releases_the_timing_barrier(tmp_path, monkeypatch):
    barrier = tmp_path / "barrier"
    barrier.mkdir()

    def launch(name, job, logs):
        result = json.dumps({"ok": True, "modes": {}})
        code = f"import time; time.sleep(0.2); open({str(logs / (name + '.json'))!r}, 'w').write({result!r})"
        (logs / f"{name}.log").write_text("")
        return subprocess.Popen([sys.executable, "-c", code])

    monkeypatch.setattr(engine_run, "launch", launch)
    timing = {"barrier": str(barrier), "engines": 3, "modes": ["all"]}
    jobs = {"timed": {"engine": {}, "timing": timing}, "plain-a": {"engine": {}}, "plain-b": {"engine": {}}}
    results = engine_run.run_pool(jobs, tmp_path, timeout=60, stagger_s=0)
    assert all(r["ok"] for r in results.values())
    # the stand-ins never reach the barrier themselves: the pool marks all three gone
    assert sorted(p.name for p in barrier.iterdir()) == ["plain-a.gone", "plain-b.gone", "timed.gone"]
