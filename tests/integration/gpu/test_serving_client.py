"""SGLang's own serving client, run in this process by the GPU harness (``server_run.run_client``)
with the arguments of the speed benchmark and of the load test, against an in-process server that
answers as ``launch_server`` does (``stand_in_server``): the arguments are the
client's, the client reads the pair's tokenizer and datasets, and its record comes back. On the GPU
the same runs go to SGLang's server. The datasets the client reads (``server_run.write_dataset``) and
the speed run's arguments (``server_run.bench_command``) are the ones ``benchmarks/speedup.py`` uses."""

import json
import subprocess
import sys
import threading

import pytest

from harness import load_run
from harness.server_run import (
    Server,
    bench_command,
    client_command,
    client_record,
    run_client,
    write_dataset,
)
from tests.support import ROOT
from tests.support.stand_in_server import ACCEPT_LENGTH, StandIn, serving


@pytest.mark.releases
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


@pytest.mark.releases
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


@pytest.mark.releases
def test_a_client_run_that_fails_raises_with_its_output(tmp_path):
    with pytest.raises(RuntimeError, match="exited with 1") as failure:
        run_client(
            ["--backend", "sglang", "--port", "9", "--ready-check-timeout-sec", "1"], tmp_path / "c.log"
        )
    assert "not ready" in str(failure.value)


HIDE_DATASETS = """
import importlib.util, sys

class HideDatasets:  # as on the GPU bundle: no datasets library
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "datasets":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, HideDatasets())
path = list(sys.path)
from harness.server_run import serving_client
client = serving_client()
import datasets
print(client.__name__, "|", datasets.__doc__, "|", importlib.util.find_spec("datasets").name)
added = [p for p in sys.path if p not in path]  # importing the client adds a folder of cutlass's
print("file-backed" if getattr(datasets, "__file__", None) else "registered", [p for p in added if "datasets" in p])
try:
    datasets.load_dataset("sharegpt")
except RuntimeError as err:
    print(err)
"""


def test_the_client_imports_where_the_datasets_library_is_absent():
    """The stand-in is registered as the ``datasets`` module (no folder goes on the path); it refuses
    hub datasets with a clear error, and ``find_spec`` (which transformers asks) still answers."""
    run = subprocess.run([sys.executable, "-c", HIDE_DATASETS], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "sglang.benchmark.serving | Stand-in for the datasets library" in run.stdout
    assert "| datasets\nregistered []\n" in run.stdout
    assert "the datasets library is not installed" in run.stdout


@pytest.mark.releases
def test_the_load_scenario_runs_end_to_end_and_sums_up(tiny_pair, tmp_path, monkeypatch):
    """``load_run.scenario`` (fewer levels, a smaller burst) against the stand-in, and the summary
    the GPU test writes from it (``benchmarks/load.py`` renders it: its test there)."""
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
    summary = json.loads(json.dumps(load_run.summary(runs)))  # as the GPU test writes it
    assert summary[load_run.STOCK] == {"error": "RuntimeError: boom"}
    plugin = summary[load_run.PLUGIN]
    assert plugin["phases"] == result["phases"] and plugin["faults"] == result["faults"]
    assert plugin["same_outputs"] and plugin["accept_length"]["after"] == [ACCEPT_LENGTH] * 2


@pytest.mark.releases
def test_sglangs_client_reads_the_pairs_language_as_its_custom_dataset(tiny_pair, tmp_path):
    """The speed runs' prompts go through SGLang's own ``custom`` dataset loader with the pair's
    tokenizer: every prompt keeps its length, every output has the asked length."""
    from argparse import Namespace

    from sglang.benchmark.datasets.custom import CustomDataset
    from transformers import AutoTokenizer

    path = write_dataset(tiny_pair, tmp_path / "language.jsonl", num_prompts=12, prompt_len=8, output_len=16)
    args = Namespace(dataset_path=str(path), num_prompts=12, sharegpt_output_len=16, sharegpt_context_len=None,
                     prompt_suffix="", apply_chat_template=False)  # fmt: skip
    rows = CustomDataset.from_args(args).load(AutoTokenizer.from_pretrained(tiny_pair.target))
    assert len(rows) == 12 and {(r.prompt_len, r.output_len) for r in rows} == {(8, 16)}


@pytest.mark.releases
def test_sglangs_client_accepts_the_speed_runs_command(monkeypatch, tmp_path):
    import sglang.benchmark.serving as client

    seen = {}
    monkeypatch.setattr(client, "run_benchmark", lambda args: seen.update(vars(args)))
    command = bench_command(31000, tmp_path / "d.jsonl", "/tok", 16, 64, 40, tmp_path / "o.jsonl", seed=2)
    monkeypatch.setattr(sys, "argv", ["serving", *command])
    client.cli_main()
    assert seen["dataset_name"] == "custom" and seen["max_concurrency"] == 16 and seen["port"] == 31000
    assert seen["sharegpt_output_len"] == 40 and not seen["disable_ignore_eos"] and seen["temperature"] == 0
