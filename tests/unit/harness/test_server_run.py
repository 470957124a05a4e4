"""The launch_server harness's own logic: Engine-style arguments become launch_server flags, and
the HTTP client reads /health and /generate as SGLang's server answers them (an in-process stand-in
server here; the real one on the GPU); SGLang's serving client gets its datasets, its arguments and
a stand-in for the datasets library where that is absent."""

import json
import sys
import types

import pytest

from harness import server_run
from harness.server_run import Server, cli_args, client_command, client_record
from tests.support.stand_in_server import StandIn, serving


def test_engine_arguments_become_launch_server_flags():
    args = cli_args(
        {"model_path": "/m", "enable_deterministic_inference": True, "disable_radix_cache": False,
         "speculative_num_steps": 3, "json_model_override_args": {"a": 1}, "cuda_graph_bs": [1, 8],
         "quantization": None}
    )  # fmt: skip
    assert args == [
        "--model-path", "/m", "--enable-deterministic-inference", "--speculative-num-steps", "3",
        "--json-model-override-args", '{"a": 1}', "--cuda-graph-bs", "1", "8",
    ]  # fmt: skip


@pytest.fixture
def stand_in(tmp_path):
    with serving() as port:
        yield Server("stand-in", {"port": port}, tmp_path)


@pytest.mark.parametrize("mode", ["all", "one-by-one", "concurrent"])
def test_every_mode_returns_each_prompts_output_in_order(stand_in, mode):
    prompts = [[1, 2, 3], [4, 5], [6]]
    result = stand_in.generate(prompts, {"max_new_tokens": 2}, mode)
    assert result["outputs"] == [[1, 2], [4, 5], [6, 6]]
    assert result["accept_length"] == [2.0, 2.0, 2.0]


def test_a_refused_request_is_an_error_naming_the_status(stand_in):
    with pytest.raises(RuntimeError, match="answered 400"):
        stand_in.generate([[1, -2]], {"max_new_tokens": 2}, "one-by-one")


def test_a_stream_is_read_to_its_end_or_left_after_some_events(stand_in):
    payload = {"input_ids": [7, 8, 9], "sampling_params": {"max_new_tokens": 3}}
    assert [e["output_ids"] for e in stand_in.stream(payload)] == [[7], [7, 8], [7, 8, 9]]
    assert len(stand_in.stream(payload, events=1)) == 1


def test_loads_are_summed_over_ranks_and_aborts_name_the_request(stand_in):
    assert stand_in.loads() == {"num_used_tokens": 15, "num_running_reqs": 3, "num_waiting_reqs": 0}
    assert stand_in.abort("r-1") == 200 and StandIn.aborted[-1] == "r-1"


def test_the_clients_last_record_is_read(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps({"completed": 1, "x": 0}) + "\n" + json.dumps({"completed": 64, "x": 1}) + "\n")
    assert client_record(out, ("completed", "missing")) == {"completed": 64, "missing": None}


def test_the_shell_command_of_a_client_run_quotes_its_arguments():
    command = client_command(["--port", 30000, "--extra-request-body", '{"a": 1}'])
    assert command == "python -m sglang.benchmark.serving --port 30000 --extra-request-body '{\"a\": 1}'"


def test_the_custom_dataset_has_a_user_and_an_assistant_turn_per_row(tmp_path):
    from sglang_eagle3_embed.doctor.tokenizer import text_of

    path = server_run.write_custom_dataset([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]], 2, tmp_path / "d.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows[1] == {"conversations": [{"content": text_of([6, 7])}, {"content": text_of([8, 9, 10])}]}
    assert len(rows) == 2


def test_the_speed_runs_command_names_its_dataset_and_concurrency(tmp_path):
    command = server_run.bench_command(
        31000, tmp_path / "d.jsonl", "/tok", 16, 64, 40, tmp_path / "o.jsonl", 2
    )
    flags = dict(zip(command[::2], command[1::2]))
    assert command[-1] == "--disable-tqdm" and flags["--dataset-name"] == "custom"
    assert (
        flags["--port"] == "31000" and flags["--max-concurrency"] == "16" and flags["--num-prompts"] == "64"
    )
    assert flags["--sharegpt-output-len"] == "40" and flags["--dataset-path"] == str(tmp_path / "d.jsonl")


def fake_client(monkeypatch):
    """``sglang.benchmark.serving`` as an empty module: the real one takes seconds to import."""
    for name in ("sglang", "sglang.benchmark", "sglang.benchmark.serving"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    return sys.modules["sglang.benchmark.serving"]


def test_without_the_datasets_library_a_stand_in_module_is_registered_and_the_path_left_alone(monkeypatch):
    client = fake_client(monkeypatch)
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` fails, as on the GPU bundle
    path = list(sys.path)
    assert server_run.serving_client() is client
    stand_in = sys.modules["datasets"]
    assert isinstance(stand_in, types.ModuleType) and stand_in.__spec__.name == "datasets"
    assert sys.path == path
    with pytest.raises(RuntimeError, match="the datasets library is not installed on this machine"):
        stand_in.load_dataset("sharegpt")


def test_an_installed_datasets_library_is_used_as_it_is(monkeypatch):
    fake_client(monkeypatch)
    installed = types.ModuleType("datasets")
    monkeypatch.setitem(sys.modules, "datasets", installed)
    server_run.serving_client()
    assert sys.modules["datasets"] is installed
