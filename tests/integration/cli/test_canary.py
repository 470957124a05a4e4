"""``probe --expectations`` then ``canary`` against a server on the CPU: the stand-in HTTP server
answering with the tiny pair's real speculative statistics under a chosen wiring (the trained one,
SGLang's default layers, the embedding slot off by one), an unreachable address, settings other
than recorded, an API key."""

import json
import socket

import pytest

from sglang_eagle3_embed.cli import main
from sglang_eagle3_embed.core.canary.expectations import Expectations, config_digest, weights_digest
from tests.support.canary import record_expectations
from tests.support.speculation import Speculation
from tests.support.stand_in_server import serving

STEPS = 7
SETTINGS = {
    "speculative_algorithm": "EAGLE3",
    "speculative_num_steps": STEPS,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": STEPS + 1,
    "model_impl": "sglang_eagle3_embed",
}
TRAINED, DEFAULTS, EMBEDDING_OFF_BY_ONE = (0, 3, 5), (2, 3, 4), (1, 3, 5)


@pytest.fixture(scope="module")
def expect(tiny_pair, tmp_path_factory):
    path = tmp_path_factory.mktemp("canary") / "expect.json"
    return record_expectations(tiny_pair, path, num_prompts=32, steps=STEPS)


@pytest.fixture(scope="module")
def speculation(tiny_pair):
    return lambda indices: Speculation(tiny_pair.target, tiny_pair.draft, indices, STEPS)


def canary(capsys, port, *extra):
    code = main(["canary", "--url", f"http://127.0.0.1:{port}", *extra])
    return code, capsys.readouterr().out


def test_the_expectations_name_the_prompts_settings_and_wirings(expect, tiny_pair):
    read = Expectations.read(expect)
    assert len(read.prompts) == 32 and {len(p) for p in read.prompts} == {8}
    assert read.trained.capture_indices == TRAINED and read.trained.ids == [-1, 2, 4]
    assert {w.capture_indices for w in read.wirings} >= {TRAINED, DEFAULTS, EMBEDDING_OFF_BY_ONE}
    assert read.settings["speculative_num_steps"] == STEPS and read.max_new_tokens == 24
    assert read.draft_config_sha256 == config_digest(tiny_pair.draft)
    assert read.draft_weights_sha256 == weights_digest(tiny_pair.draft) != weights_digest(tiny_pair.target)
    assert read.target_config_sha256 == config_digest(tiny_pair.target)
    assert (read.backend, read.dtype) == ("hf", "float32")
    assert all(w.se > 0 for w in read.wirings)


def test_a_server_feeding_the_trained_tensors_passes(expect, speculation, capsys):
    with serving(speculate=speculation(TRAINED), settings=SETTINGS) as port:
        code, out = canary(capsys, port, "--expect", str(expect))
    assert code == 0, out
    assert "as the trained wiring [-1, 2, 4]" in out and "speculative_num_steps=7" in out


def test_a_server_feeding_the_default_layers_is_named(expect, speculation, capsys):
    with serving(speculate=speculation(DEFAULTS), settings=SETTINGS) as port:
        code, out = canary(capsys, port, "--expect", str(expect))
    assert code == 1, out
    assert "as SGLang's default layers" in out and "not running the plugin" in out
    assert "the draft was trained on [-1, 2, 4]" in out


def test_a_server_off_by_one_in_the_embedding_slot_is_named(expect, speculation, capsys):
    with serving(speculate=speculation(EMBEDDING_OFF_BY_ONE), settings=SETTINGS) as port:
        code, text = canary(capsys, port, "--expect", str(expect), "--json")
    out = json.loads(text)
    assert code == 1
    assert out["ok"] is False and out["matched"] == "layer 0's output for the embedding"
    assert out["trained_ids"] == [-1, 2, 4] and "numbering" in out["verdict"][0]


def test_settings_that_change_accept_length_are_not_compared(expect, speculation, capsys):
    settings = {**SETTINGS, "speculative_num_steps": 3, "speculative_num_draft_tokens": 4}
    with serving(speculate=speculation(TRAINED), settings=settings) as port:
        code, out = canary(capsys, port, "--expect", str(expect))
    assert code == 2, out
    assert "--speculative-num-steps is 3 on the server, 7 in the expectations" in out
    assert "probe --num-steps N --expectations FILE" in out


def test_without_expectations_it_reports_what_is_served(speculation, capsys):
    with serving(speculate=speculation(TRAINED), settings=SETTINGS) as port:
        code, out = canary(capsys, port, "--num-prompts", "4")
    assert code == 0, out
    assert "served    : accept length" in out and "over 4 requests" in out


def test_an_api_key_is_sent_and_its_absence_named(expect, speculation, capsys, monkeypatch):
    monkeypatch.delenv("SGLANG_API_KEY", raising=False)
    with serving(speculate=speculation(TRAINED), settings=SETTINGS, api_key="sesame") as port:
        code = main(["canary", "--url", f"http://127.0.0.1:{port}", "--expect", str(expect)])
        assert code == 2 and "the server wants --api-key" in capsys.readouterr().err
        code, out = canary(capsys, port, "--expect", str(expect), "--api-key", "sesame")
    assert code == 0, out


def test_an_unreachable_server_exits_2_naming_the_address(expect, capsys):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    code = main(["canary", "--url", f"http://127.0.0.1:{port}", "--expect", str(expect)])
    err = capsys.readouterr().err
    assert code == 2 and f"127.0.0.1:{port}: no server answers" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", "localhost:30000"], "http://HOST:PORT"),
        (["--url", "http://x", "--tolerance", "2"], "--tolerance 2.0"),
        (["--url", "http://x", "--timeout", "0"], "--timeout 0.0"),
        (["--url", "http://x", "--expect", "/nonexistent/expect.json"], "cannot be read"),
    ],
)
def test_bad_invocations_exit_2(argv, message, capsys):
    assert main(["canary", *argv]) == 2
    assert message in capsys.readouterr().err


# --- bad input: every case exits 2 with one line naming it, within its timeout -------------------


def canary_process(*argv, timeout: float = 60):
    """The command in its own process: a read that blocks fails the test instead of hanging it."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "sglang_eagle3_embed.cli", "canary", *argv],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    return done.returncode, done.stderr


@pytest.mark.parametrize("kind", ["fifo", "folder", "device", "empty", "garbage", "list", "binary"])
def test_an_expectations_file_that_is_not_one_exits_2_naming_it(kind, tmp_path):
    import os

    path = tmp_path / "expect.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "device":
        path = "/dev/zero"  # endless: read whole, it would never end
    else:
        data = {"empty": b"", "garbage": b"{not json", "list": b"[1, 2]", "binary": b"\xff\xfe\x00"}[kind]
        path.write_bytes(data)
    code, err = canary_process("--url", "http://127.0.0.1:9", "--expect", str(path))
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    want = {"fifo": "is a FIFO", "folder": "is a folder", "device": "is a device", "empty": "not JSON",
            "garbage": "not JSON", "list": "--expect", "binary": "not UTF-8"}[kind]  # fmt: skip
    assert want in lines[0] and str(path) in lines[0], lines[0]


class _Fault:
    """A server on 127.0.0.1 that misbehaves one way: ``silent`` accepts and never answers,
    ``garbage`` answers bytes that are not HTTP, ``reset`` closes every connection at once;
    ``http:CODE`` answers every path with that status; ``slow-generate`` answers ``/server_info``
    and never ``/generate``; ``one-answer`` answers ``/generate`` with one generation whatever the
    number of prompts."""

    def __init__(self, behaviour: str):
        import threading

        self.behaviour, self.sock = behaviour, socket.create_server(("127.0.0.1", 0))
        self.port, self.stop = self.sock.getsockname()[1], threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self.port

    def __exit__(self, *exc):
        self.stop.set()
        self.sock.close()

    def serve(self):
        import struct
        import threading

        held = []
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.behaviour == "silent":
                held.append(conn)
            elif self.behaviour == "garbage":
                conn.sendall(b"\x00\x01 not http at all\r\n\r\n")
                conn.close()
            elif self.behaviour == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
            else:
                threading.Thread(target=self.http, args=(conn, held), daemon=True).start()

    def http(self, conn, held):
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = conn.recv(65536)
            if not chunk:
                return
            request += chunk
        head, _, body = request.partition(b"\r\n\r\n")
        length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length")), b"0"))  # fmt: skip
        while len(body) < length:
            body += conn.recv(65536)
        path = head.split(b" ")[1].decode()
        if self.behaviour.startswith("http:"):
            status, payload = int(self.behaviour[5:]), {"error": "no"}
        elif path.endswith("server_info"):
            status, payload = 200, SETTINGS
        elif self.behaviour == "slow-generate":
            held.append(conn)
            return
        else:
            meta = {"spec_accept_length": 2.0, "completion_tokens": 24, "spec_verify_ct": 12}
            status, payload = 200, [{"output_ids": [1] * 24, "meta_info": meta}]
        data = json.dumps(payload).encode()
        conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n%s" % (status, len(data), data))  # fmt: skip
        conn.close()


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        ("silent", "no answer within --timeout 2 s; the server is busy"),
        ("garbage", "not HTTP"),
        ("reset", "the connection failed"),
        ("http:401", "the server wants --api-key"),
        ("http:403", "the server wants --api-key"),
        ("http:404", "HTTP 404"),
        ("http:500", "HTTP 500"),
        ("slow-generate", "no answer within --timeout 2 s (it answered /server_info)"),
        ("one-answer", "1 answers to 32 prompts"),
    ],
)
def test_a_server_that_misbehaves_exits_2_with_one_line_within_the_timeout(
    behaviour, message, expect, capsys
):
    import time

    with _Fault(behaviour) as port:
        started = time.monotonic()
        code = main(
            ["canary", "--url", f"http://127.0.0.1:{port}", "--expect", str(expect), "--timeout", "2"]
        )
        took = time.monotonic() - started
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert took < 10, f"{took:.1f} s: more than the --timeout allows"


def test_a_wrong_api_key_is_named_as_wrong(expect, speculation, capsys):
    with serving(speculate=speculation(TRAINED), settings=SETTINGS, api_key="sesame") as port:
        code = main(
            ["canary", "--url", f"http://127.0.0.1:{port}", "--expect", str(expect), "--api-key", "nope"]
        )
    err = capsys.readouterr().err
    assert code == 2 and "refused the API key given" in err, err
