"""The tiny pairs' tokenizer, as SGLang's server loads it (``get_tokenizer``, what ``launch_server``
uses without ``--skip-tokenizer-init``), in the DeepSeek-V3 target and in its Kimi-K2.5 wrapping:
the language's text encodes to its token ids and decodes back, token by token too (how the server
streams), and the target's config names no end token that would stop greedy generation inside the
language."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle3_embed.core.readers.deployment import text_config
from sglang_eagle3_embed.doctor.tokenizer import text_of

pytestmark = pytest.mark.releases  # SGLang's tokenizer loader, cached: whichever test runs first runs it

_LOADED = {}


@pytest.fixture(scope="module", params=["tiny_pair", "tiny_kimi_pair"])
def pair(request):
    return request.getfixturevalue(request.param)


def sglang_tokenizer(folder):
    from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer

    if folder not in _LOADED:
        _LOADED[folder] = get_tokenizer(str(folder))
    return _LOADED[folder]


@settings(max_examples=40, deadline=None)
@given(ids=st.lists(st.integers(0, 127), min_size=1, max_size=30))
def test_sglang_loads_it_and_it_round_trips(pair, ids):
    tokenizer = sglang_tokenizer(pair.target)
    assert tokenizer.encode(text_of(ids)) == ids
    assert tokenizer.decode(ids) == text_of(ids)
    streamed = "".join(
        tokenizer.decode(ids[: k + 1])[len(tokenizer.decode(ids[:k])) :] for k in range(len(ids))
    )
    assert streamed == text_of(ids)


def test_the_target_names_no_end_token(pair):
    config = json.loads((pair.target / "config.json").read_text())
    for part in (config, text_config(config)):  # Kimi-K2.5 nests the DeepSeek config
        assert part.get("eos_token_id") is None and part.get("bos_token_id") is None
    assert sglang_tokenizer(pair.target).eos_token_id is None


def test_text_outside_the_language_reads_as_the_unknown_token(pair):
    """SGLang's server warm-up sends English at start-up: it must tokenize, not fail the server."""
    tokenizer = sglang_tokenizer(pair.target)
    assert tokenizer.encode("The capital city of France is") == [0] * 6
    assert tokenizer.encode("w5 Paris w7") == [5, 0, 7]
    assert tokenizer.decode([0, 5], skip_special_tokens=True) == "w0 w5"  # w0 is the language's too
