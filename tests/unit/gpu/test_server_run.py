"""The launch_server harness's own logic: Engine-style arguments become launch_server flags, and
the HTTP client reads /health and /generate as SGLang's server answers them (an in-process stand-in
server here; the real one on the GPU)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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

    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
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
