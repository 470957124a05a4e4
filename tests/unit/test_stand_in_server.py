"""The stand-in for SGLang's HTTP server (``tests.support.stand_in_server``) answers
the endpoints the harness and SGLang's serving client read, laid out as ``launch_server`` lays
them out: the model's name, the average accept length, text prompts (the client's datasets) and
a 404 elsewhere."""

import json
import urllib.error
import urllib.request

import pytest

from tests.support.stand_in_server import ACCEPT_LENGTH, answer, serving


def get(port: int, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return response.status, response.read()


def post(port: int, path: str, payload: dict):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_the_stand_in_names_its_model_and_its_accept_length_and_refuses_other_paths():
    with serving(model="/pairs/target") as port:
        assert get(port, "/health")[0] == 200
        assert json.loads(get(port, "/v1/models")[1])["data"][0]["id"] == "/pairs/target"
        info = json.loads(get(port, "/server_info")[1])
        assert info["internal_states"][0]["avg_spec_accept_length"] == ACCEPT_LENGTH
        with pytest.raises(urllib.error.HTTPError, match="404"):
            get(port, "/nowhere")


def test_a_text_prompt_is_answered_with_its_last_word_and_a_batch_in_order():
    with serving() as port:
        out = post(port, "/generate", {"text": ["w1 w2", "w3"], "sampling_params": {"max_new_tokens": 3}})
    assert [o["text"] for o in out] == ["w2 w2 w2", "w3 w3 w3"]
    meta = out[0]["meta_info"]
    assert meta["completion_tokens"] == 3 and meta["spec_accept_length"] == ACCEPT_LENGTH


def test_a_token_prompt_repeats_to_the_asked_length():
    assert answer([4, 5], 5)["output_ids"] == [4, 5, 4, 5, 4]
    assert answer([4, 5], 1)["text"] is None
