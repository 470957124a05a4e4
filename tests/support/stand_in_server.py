"""An in-process HTTP server that answers as SGLang's ``launch_server`` does, for the endpoints the
GPU harness (``server_run``) and SGLang's serving client use: ``/health``,
``/v1/models``, ``/server_info``, ``/v1/loads``, ``/abort_request`` and ``/generate`` (token ids
or text, batched or not, streamed as server-sent events or whole). It generates nothing real:
each output repeats the prompt's last token (or word), so that the callers' plumbing is tested
on the CPU, and SGLang's own server on the GPU.

Given ``speculate`` (``serving(speculate=...)``), token-id answers carry the speculative statistics
that function computes for the prompts (the canary's tests serve a draft under a chosen wiring
this way, on the CPU), and ``/server_info`` reports ``settings``; given ``api_key``, every call
without ``Authorization: Bearer KEY`` gets 401, as SGLang's ``--api-key`` does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

ACCEPT_LENGTH = 2.0
"""The ``spec_accept_length`` of every answer, and the server's average in ``/server_info``."""


class StandIn(BaseHTTPRequestHandler):
    model: ClassVar[str] = "stand-in"
    busy: ClassVar[bool] = True  # /v1/loads: two ranks with requests running, or idle
    aborted: ClassVar[list] = []
    generated: ClassVar[list] = []
    speculate: ClassVar[Callable | None] = None
    """(prompts, max_new_tokens) -> one ``meta_info`` update per prompt."""
    settings: ClassVar[dict] = {}
    api_key: ClassVar[str | None] = None

    def log_message(self, *args):
        pass

    def reply(self, payload, status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def refused(self) -> bool:
        if self.api_key and self.headers.get("Authorization") != f"Bearer {self.api_key}":
            self.reply({"error": "unauthorized"}, 401)
            return True
        return False

    def do_GET(self):
        if self.refused():
            return None
        if self.path.startswith("/v1/loads"):
            k = 1 if self.busy else 0
            loads = [
                {"dp_rank": r, "num_used_tokens": 5 * r * k, "num_running_reqs": r * k, "num_waiting_reqs": 0}
                for r in (1, 2)
            ]
            return self.reply({"loads": loads})
        if self.path == "/v1/models":
            return self.reply({"object": "list", "data": [{"id": self.model, "object": "model"}]})
        if self.path == "/server_info":
            return self.reply(
                {**self.settings, "internal_states": [{"avg_spec_accept_length": ACCEPT_LENGTH}]}
            )
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        return None

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.refused():
            return None
        if self.path == "/abort_request":
            StandIn.aborted.append(body["rid"])
            return self.reply(None)
        prompt = body.get("input_ids", body.get("text"))
        batched = isinstance(prompt, list) and prompt and isinstance(prompt[0], (list, str))
        prompts = prompt if batched else [prompt]
        if any(isinstance(p, list) and any(t < 0 for t in p) for p in prompts):
            return self.reply({"error": {"message": "negative token id"}}, 400)
        n = body["sampling_params"]["max_new_tokens"]
        StandIn.generated.append(n)
        if body.get("stream"):  # SGLang's server-sent events: one per step, then [DONE]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for k in range(1, n + 1):
                self.wfile.write(f"data: {json.dumps(answer(prompts[0], k))}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            return None
        out = [answer(p, n) for p in prompts]
        if self.speculate is not None:
            for one, meta in zip(out, self.speculate(prompts, n), strict=True):
                one["meta_info"].update(meta)
        return self.reply(out if batched else out[0])


def answer(prompt, n: int) -> dict:
    """The answer for ``prompt`` after ``n`` tokens, as ``/generate`` lays it out: the prompt's ids
    repeated to ``n`` (a token-id prompt), or its last word ``n`` times (a text prompt)."""
    if isinstance(prompt, str):
        words = prompt.split() or ["x"]
        ids, text = list(range(n)), " ".join([words[-1]] * n)
    else:
        ids, text = (prompt * n)[:n], None
    meta = {"completion_tokens": n, "prompt_tokens": len(prompt), "spec_accept_length": ACCEPT_LENGTH}
    return {"text": text, "output_ids": ids, "meta_info": meta}


@contextmanager
def serving(
    model: str = "stand-in",
    busy: bool = True,
    speculate: Callable | None = None,
    settings: dict | None = None,
    api_key: str | None = None,
) -> Iterator[int]:
    """A stand-in server on a free local port, for the ``with`` block; yields the port."""
    fields = {"model": model, "busy": busy, "speculate": staticmethod(speculate) if speculate else None}
    fields.update(settings=settings or {}, api_key=api_key)
    handler = type("StandInFor", (StandIn,), fields)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
