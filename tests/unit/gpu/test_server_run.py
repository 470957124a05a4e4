"""The launch_server harness's own logic: Engine-style arguments become launch_server flags, and
the HTTP client reads /health and /generate as SGLang's server answers them (an in-process stand-in
server here; the real one on the GPU)."""

import json

import pytest

from tests.gpu.server_run import Server, cli_args, client_command, client_record
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
