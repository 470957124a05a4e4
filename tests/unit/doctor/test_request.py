"""doctor.request: the probe's typed request and the checks of its input, without a model (the
command line's end-to-end refusals are in tests/integration/cli/test_bad_input.py)."""

import json
from pathlib import Path

import pytest
import torch

from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.core.model_folder import ModelFolder
from sglang_eagle3_embed.doctor.request import (
    ProbeRequest,
    check_output,
    check_roles,
    load_prompts,
    parse_engine_args,
)


@pytest.mark.parametrize(
    ("field", "value", "flag"),
    [("num_prompts", 0, "--num-prompts"), ("num_steps", 0, "--num-steps"), ("new_tokens", 1, "--new-tokens"),
     ("prompt_len", 1, "--prompt-len")],
)  # fmt: skip
def test_a_request_with_impossible_numbers_cannot_be_made(field, value, flag):
    with pytest.raises(InputError, match=f"^{flag} {value}: must be at least"):
        ProbeRequest(Path("t"), Path("d"), **{field: value})
    ProbeRequest(Path("t"), Path("d"), **{field: value + 1})


def test_engine_arguments_parse_as_json_where_they_can():
    args = parse_engine_args(["dtype=bfloat16", "mem-fraction-static=0.5", "trust_remote_code=true"])
    assert args == {"dtype": "bfloat16", "mem_fraction_static": 0.5, "trust_remote_code": True}
    assert parse_engine_args(None) == {}
    for bad in ("dtype", "=1"):
        with pytest.raises(InputError, match=f"--engine-arg {bad}: write KEY=VALUE"):
            parse_engine_args([bad])


def test_output_is_checked_before_the_run(tmp_path):
    assert check_output(None) is None
    assert check_output(str(tmp_path / "r.json")) == tmp_path / "r.json"
    with pytest.raises(InputError, match="is a folder"):
        check_output(str(tmp_path))
    with pytest.raises(InputError, match="does not exist; create it first"):
        check_output(str(tmp_path / "no" / "r.json"))


def folder(tmp_path, name, config) -> ModelFolder:
    path = tmp_path / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return ModelFolder.read(path)


def test_roles_catch_a_swap_and_a_draft_of_another_kind(tmp_path):
    target = folder(tmp_path, "t", {"architectures": ["DeepseekV3ForCausalLM"]})
    draft = folder(tmp_path, "d", {"architectures": ["LlamaForCausalLMEagle3"]})
    check_roles(target, draft)
    with pytest.raises(InputError, match="did you swap --target and --draft"):
        check_roles(draft, target)
    other = folder(tmp_path, "o", {"architectures": ["LlamaForCausalLM"]})
    with pytest.raises(InputError, match="probe reads LlamaForCausalLMEagle3 drafts"):
        check_roles(target, other)


def test_prompts_from_a_file_of_token_ids_or_uniform_over_the_vocabulary(tmp_path):
    target = folder(tmp_path, "t", {"vocab_size": 50}).path
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("[1, 2, 3]\n\n[4, 5]\n[6, 7, 8, 9]\n")
    tokens = load_prompts(ProbeRequest(target, Path("d"), prompts=prompts, num_prompts=2))
    assert torch.equal(tokens, torch.tensor([[1, 2], [4, 5]]))
    drawn = load_prompts(ProbeRequest(target, Path("d"), num_prompts=3, prompt_len=4, seed=1))
    assert drawn.shape == (3, 4) and int(drawn.max()) < 50
    assert torch.equal(
        drawn, load_prompts(ProbeRequest(target, Path("d"), num_prompts=3, prompt_len=4, seed=1))
    )
    no_vocab = folder(tmp_path, "n", {}).path
    with pytest.raises(InputError, match=r"has no integer vocab_size .*; pass --prompts FILE"):
        load_prompts(ProbeRequest(no_vocab, Path("d")))
    for text, expected in (
        ("[1, x]", "is not a JSON list"),
        ("[" * 100_000, "is not a JSON list"),
        ("[1]", "at least 2"),
    ):
        prompts.write_text(text)
        with pytest.raises(InputError, match=expected):
            load_prompts(ProbeRequest(target, Path("d"), prompts=prompts))
