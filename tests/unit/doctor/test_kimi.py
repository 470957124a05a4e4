"""The files a Kimi-K2.5 folder serves with beside its weights (``doctor/kimi.py``)."""

import copy
import json

from sglang_eagle3_embed.doctor.kimi import REAL_TEXT, kimi_config, write_serving_files
from sglang_eagle3_embed.doctor.tokenizer import write_tokenizer

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


def served_tokenizer(folder):
    from transformers import AutoTokenizer

    write_tokenizer(folder, 16)
    write_serving_files(folder)
    return AutoTokenizer.from_pretrained(folder)


def test_sglangs_warm_up_chat_request_renders(tmp_path):
    # a VLM's start-up warm-up is a chat completion holding only an image whenever the tokenizer is
    # loaded (srt/entrypoints/http_server.py:2400-2440); without a template the server exits
    tokenizer = served_tokenizer(tmp_path)
    assert tokenizer.apply_chat_template([{"role": "user", "content": [IMAGE]}], tokenize=False) == ""


def test_chat_messages_render_as_their_text_in_the_language(tmp_path):
    tokenizer = served_tokenizer(tmp_path)
    messages = [
        {"role": "system", "content": "w3 w4"},
        {"role": "user", "content": [{"type": "text", "text": "w5"}, IMAGE, {"type": "text", "text": "w6"}]},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    assert tokenizer(text)["input_ids"] == [3, 4, 5, 6]


def test_the_tokenizer_config_keeps_what_it_had(tmp_path):
    write_tokenizer(tmp_path, 16)
    before = json.loads((tmp_path / "tokenizer_config.json").read_text())
    write_serving_files(tmp_path)
    after = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert after == {**before, "chat_template": after["chat_template"]}
    assert (tmp_path / "processor_config.json").exists()


def test_the_config_owns_its_text_config():
    # SGLang's and transformers' config classes standardize ``rope_scaling`` in place: parsing the
    # written config must not change the text config it was made from (a recorded spec)
    text = copy.deepcopy(REAL_TEXT)
    kimi_config(text)["text_config"]["rope_scaling"]["rope_type"] = "yarn"
    assert text == REAL_TEXT
