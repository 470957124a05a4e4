"""SGLang's own serving client, run in this process by the GPU harness (``server_run.run_client``)
with the arguments of the speed benchmark and of the load test, against an in-process server that
answers as ``launch_server`` does (``tests/support/stand_in_server.py``): the arguments are the
client's, the client reads the pair's tokenizer and datasets, and its record comes back. On the GPU
the same runs go to SGLang's server."""

import json
import subprocess
import sys
import threading

import pytest

from benchmarks.speedup import bench_command, write_dataset
from tests.gpu import load_run
from tests.gpu.server_run import Server, client_command, client_record, run_client
from tests.support import ROOT
from tests.support.stand_in_server import ACCEPT_LENGTH, StandIn, serving


def test_the_speed_benchmarks_run_reads_the_pairs_language_and_reports(tiny_pair, tmp_path):
    dataset = write_dataset(
        tiny_pair, tmp_path / "language.jsonl", num_prompts=12, prompt_len=8, output_len=6
    )
    out = tmp_path / "bench.jsonl"
    with serving(model=str(tiny_pair.target)) as port:
        command = bench_command(port, dataset, str(tiny_pair.target), 4, 12, 6, out, seed=0)
        run_client(command, tmp_path / "bench.log")
    assert (tmp_path / "bench.log").read_text().splitlines()[0] == client_command(command)
    record = client_record(out, ("completed", "accept_length", "output_throughput", "total_output_tokens"))
    assert record["completed"] == 12 and record["accept_length"] == ACCEPT_LENGTH
    assert record["total_output_tokens"] == 12 * 6 and record["output_throughput"] > 0


@pytest.mark.parametrize("stream", [True, False])
def test_a_load_phase_sends_every_request_and_reads_its_figures(tiny_pair, tmp_path, stream):
    StandIn.generated.clear()
    with serving(model=str(tiny_pair.target)) as port:
        server = Server("stand-in", {"port": port}, tmp_path)
        figures = load_run.load_phase(server, tiny_pair.target, 16, stream, tmp_path)
    assert "error" not in figures, figures
    assert figures["completed"] == load_run.requests(16) == len(StandIn.generated) - 1  # one warm-up
    lengths = StandIn.generated[1:]
    assert min(lengths) >= 16 and max(lengths) <= 64 and len(set(lengths)) > 1  # mixed output lengths
    assert figures["p99_ttft_ms"] >= figures["median_ttft_ms"] > 0


def test_a_client_run_that_fails_raises_with_its_output(tmp_path):
    with pytest.raises(RuntimeError, match="exited with 1") as failure:
        run_client(
            ["--backend", "sglang", "--port", "9", "--ready-check-timeout-sec", "1"], tmp_path / "c.log"
        )
    assert "not ready" in str(failure.value)


HIDE_DATASETS = """
import importlib.machinery, sys

class HideDatasets:  # as on the GPU bundle: no datasets library, except a stand-in put on the path
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] != "datasets":
            return None
        stand_ins = [p for p in sys.path if "datasets-stand-in" in p]
        spec = importlib.machinery.PathFinder.find_spec(name, stand_ins) if stand_ins else None
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return spec

sys.meta_path.insert(0, HideDatasets())
from tests.gpu.server_run import serving_client
client = serving_client()
import datasets
print(client.__name__, datasets.__file__)
try:
    datasets.load_dataset("sharegpt")
except RuntimeError as err:
    print(err)
"""


def test_the_client_imports_where_the_datasets_library_is_absent():
    run = subprocess.run([sys.executable, "-c", HIDE_DATASETS], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "sglang.benchmark.serving" in run.stdout and "datasets-stand-in" in run.stdout
    assert "the datasets library is not installed" in run.stdout


def test_the_load_scenario_runs_end_to_end_and_its_figures_render(tiny_pair, tmp_path, monkeypatch):
    """``load_run.scenario`` (fewer levels, a smaller burst) against the stand-in, then
    ``benchmarks/load.py`` renders the summary the GPU test writes."""
    monkeypatch.setattr(load_run, "CONCURRENCY", (1, 4))
    monkeypatch.setattr(load_run, "BURST", 8)
    readings = iter(range(10_000, 0, -10))
    prompts = [[5, 6, 7, 8], [9, 10, 11, 12]]
    with serving(model=str(tiny_pair.target), busy=False) as port:
        run = load_run.scenario(tmp_path, tmp_path / "gpu.lock", tiny_pair.target, prompts, threading.Barrier(1),
                                memory=lambda: float(next(readings)))  # fmt: skip
        result = run(Server("stand-in", {"port": port}, tmp_path))
    assert [(p["round"], p["concurrency"], p["stream"]) for p in result["phases"]] == [
        (r, c, s) for r in (1, 2) for c in (1, 4) for s in (True, False)
    ]
    assert all(p["completed"] == load_run.requests(p["concurrency"]) for p in result["phases"])
    assert list(result["faults"]) == list(load_run.FAULTS)
    assert result["faults"]["burst"]["whole"] == 8 and result["faults"]["disconnect"]["events_read"] == 3
    assert (
        result["before"]["outputs"] == result["after"]["outputs"] == [[5, 6, 7, 8] * 10, [9, 10, 11, 12] * 10]
    )

    runs = {load_run.PLUGIN: {"after": result}, load_run.STOCK: {"error": "RuntimeError: boom"}}
    saved = tmp_path / "load_faults.json"
    saved.write_text(json.dumps({"servers": load_run.summary(runs), "env": {"date": "2026-12-01"}}))
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.load", "--quick", "--from-json", saved, "--results", tmp_path],
        capture_output=True, text=True, cwd=ROOT, check=True,
    ).stdout  # fmt: skip
    assert (tmp_path / "load_faults.png").read_bytes()[:4] == b"\x89PNG"
    assert "| plugin | 4 | no | 32 |" in out and "| plugin | 1 | yes | 32 |" in out
    assert "| burst | sent 8, whole 8, statuses [200]; KV after 0 |" in out
    assert "| same tokens before and after | yes |" in out
