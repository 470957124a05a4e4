"""The load scenario's ordering (``harness.load_run``), with its client runs and
faults replaced: each server measures alone, and none stops before every one has measured (a
stopping server frees GPU memory, which would hide another's leak)."""

import threading
import time

from harness import load_run


class Idle:
    name = "fake"

    def __init__(self, log, name):
        self.log, self.name = log, name

    def loads(self):
        return {"num_used_tokens": 0, "num_running_reqs": 0, "num_waiting_reqs": 0}

    def generate(self, prompts, sampling, mode):
        self.log.append((self.name, "generate", time.monotonic()))
        return {"outputs": [[1]], "accept_length": [1.0]}


def test_servers_measure_one_at_a_time_and_none_stops_before_all_have_measured(tmp_path, monkeypatch):
    monkeypatch.setattr(load_run, "CONCURRENCY", (1,))
    monkeypatch.setattr(load_run, "CASES", {})
    log, returned = [], {}

    def phase(server, *args):
        time.sleep(0.05 if server.name == "fast" else 0.3)
        return {"completed": 1}

    monkeypatch.setattr(load_run, "load_phase", phase)
    ready = threading.Barrier(2)

    def run(name):
        scenario = load_run.scenario(tmp_path, tmp_path / "lock", "t", [[1]], ready, memory=lambda: 1.0)
        scenario(Idle(log, name))
        returned[name] = time.monotonic()

    threads = [threading.Thread(target=run, args=(name,)) for name in ("fast", "slow")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    spans = {name: [t for n, _, t in log if n == name] for name in ("fast", "slow")}
    first, second = sorted(spans, key=lambda n: spans[n][0])
    assert spans[first][-1] < spans[second][0]  # alone: one's reference and check before the other's
    assert min(returned.values()) >= max(spans[first][-1], spans[second][-1])  # nobody stops early
