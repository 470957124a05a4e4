"""The launch_server harness's own logic: Engine-style arguments become launch_server flags, and
the HTTP client reads /health and /generate as SGLang's server answers them (an in-process stand-in
server here; the real one on the GPU)."""

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from tests.gpu.server_run import Server, cli_args


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


class StandIn(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    aborted: ClassVar[list] = []

    def do_GET(self):
        if self.path.startswith("/v1/loads"):
            loads = [
                {"dp_rank": r, "num_used_tokens": 5 * r, "num_running_reqs": r, "num_waiting_reqs": 0}
                for r in (1, 2)
            ]
            return self.reply({"loads": loads})
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def reply(self, payload, status=200):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/abort_request":
            StandIn.aborted.append(body["rid"])
            return self.reply(None)
        if body.get("stream"):  # SGLang's server-sent events: one per step, then [DONE]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for k in range(body["sampling_params"]["max_new_tokens"]):
                self.wfile.write(
                    f"data: {json.dumps({'output_ids': body['input_ids'][: k + 1]})}\n\n".encode()
                )
            self.wfile.write(b"data: [DONE]\n\n")
            return None
        ids = body["input_ids"]
        batch = ids if isinstance(ids[0], list) else [ids]
        if any(t < 0 for p in batch for t in p):
            self.send_response(400)
            self.end_headers()
            self.wfile.write(b'{"error": "negative token id"}')
            return
        n = body["sampling_params"]["max_new_tokens"]
        out = [{"output_ids": [p[-1]] * n, "meta_info": {"spec_accept_length": 2.0}} for p in batch]
        data = json.dumps(out if isinstance(ids[0], list) else out[0]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def stand_in(tmp_path):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    server = Server("stand-in", {"port": httpd.server_address[1]}, tmp_path)
    yield server
    httpd.shutdown()


@pytest.mark.parametrize("mode", ["all", "one-by-one", "concurrent"])
def test_every_mode_returns_each_prompts_output_in_order(stand_in, mode):
    prompts = [[1, 2, 3], [4, 5], [6]]
    result = stand_in.generate(prompts, {"max_new_tokens": 2}, mode)
    assert result["outputs"] == [[3, 3], [5, 5], [6, 6]]
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


def test_the_client_reads_its_last_record_and_gets_a_stand_in_datasets(tmp_path):
    from tests.gpu.server_run import client_env, client_record

    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps({"completed": 1, "x": 0}) + "\n" + json.dumps({"completed": 64, "x": 1}) + "\n")
    assert client_record(out, ("completed", "missing")) == {"completed": 64, "missing": None}
    env = client_env(tmp_path / "stub")
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path / "stub")
    namespace = {}
    exec((tmp_path / "stub" / "datasets.py").read_text(), namespace)
    with pytest.raises(RuntimeError, match="not installed"):
        namespace["load_dataset"]("sharegpt")
    assert client_env(None) == dict(os.environ)
