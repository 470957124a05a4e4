"""doctor.request: the probe's typed request and the checks of its input, without a model (the
command line's end-to-end refusals are in tests/integration/cli/test_bad_input.py)."""

import json
from pathlib import Path

import pytest
import torch

from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.core.readers.model_folder import ModelFolder
from sglang_eagle3_embed.doctor.probe import probe_folders
from sglang_eagle3_embed.doctor.request import (
    ProbeRequest,
    check_capture,
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


def test_roles_catch_a_swap(tmp_path):
    target = folder(tmp_path, "t", {"architectures": ["DeepseekV3ForCausalLM"]})
    draft = folder(tmp_path, "d", {"architectures": ["LlamaForCausalLMEagle3"]})
    check_roles(target, draft)
    with pytest.raises(InputError, match="did you swap --target and --draft"):
        check_roles(draft, target)


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


def weights(path: Path, tensors: dict[str, list[int]]) -> None:
    """A model.safetensors of zeros (F32) with the given shapes, its header written by hand."""
    header, offset = {}, 0
    for name, shape in tensors.items():
        size = 4 * int(torch.tensor(shape).prod())
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    (path / "model.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(offset))


def pair_folders(tmp_path, *, ids, fc_captures, layers=7, hidden=4) -> tuple[Path, Path]:
    """A target of ``layers`` layers and a draft whose config names ``ids`` and whose fc reads
    ``fc_captures`` states: configs and headers only."""
    target = folder(tmp_path, "t", {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": layers,
                                    "hidden_size": hidden, "vocab_size": 50}).path  # fmt: skip
    layer_norms = {f"model.layers.{i}.input_layernorm.weight": [hidden] for i in range(layers)}
    weights(target, {"model.embed_tokens.weight": [50, hidden], **layer_norms})
    config = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": hidden, "target_hidden_size": hidden,
              "vocab_size": 50, "eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}}  # fmt: skip
    draft = folder(tmp_path, "d", config).path
    weights(draft, {"fc.weight": [hidden, fc_captures * hidden], "midlayer.hidden_norm.weight": [hidden]})
    return target, draft


def no_model_loads(monkeypatch) -> None:
    from sglang_eagle3_embed.doctor import backends

    def load(*args, **kwargs):
        raise AssertionError("a model loaded before the inputs were checked")

    monkeypatch.setattr(backends, "make_backend", load)


def check(target: Path, draft: Path) -> None:
    check_capture(ModelFolder.read(target, "--target"), ModelFolder.read(draft, "--draft"))


@pytest.mark.parametrize(
    ("ids", "fc_captures", "expected"),
    [([-1, 2, 4, 5], 3, "reads 12 features but the target would capture 4 x 4 = 16"),
     ([-1, 2, 4], 4, "reads 16 features but the target would capture 3 x 4 = 12"),
     ([-1, 2, 40], 2, "the plugin refuses the ids .* no other reading of them gives the 2 captures")],
)  # fmt: skip
def test_a_draft_whose_fc_disagrees_with_its_ids_is_refused_before_a_model_loads(
    tmp_path, monkeypatch, ids, fc_captures, expected
):
    target, draft = pair_folders(tmp_path, ids=ids, fc_captures=fc_captures)
    with pytest.raises(InputError, match=expected) as err:
        check(target, draft)
    assert f"--draft {draft} (ids in {draft / 'config.json'}" in str(err.value)
    assert "hidden size 4" in str(err.value) and "7 layers" in str(err.value)

    no_model_loads(monkeypatch)
    with pytest.raises(InputError, match=expected):
        probe_folders(ProbeRequest(target, draft))


def test_a_target_without_layers_is_refused_before_a_model_loads(tmp_path, monkeypatch):
    no_model_loads(monkeypatch)
    target, draft = pair_folders(tmp_path, ids=[-1, 2, 4], fc_captures=3, layers=0)
    with pytest.raises(
        InputError,
        match=f"--target {target}: the target's num_hidden_layers .* is 0; expected a positive integer",
    ):
        probe_folders(ProbeRequest(target, draft))


def test_a_draft_whose_fc_fits_its_ids_passes(tmp_path):
    check(*pair_folders(tmp_path, ids=[-1, 2, 4], fc_captures=3))
    (tmp_path / "two").mkdir()
    check(*pair_folders(tmp_path / "two", ids=[0, 3], fc_captures=2))


def test_probe_reads_each_weight_header_once_before_a_model_loads(tmp_path, monkeypatch):
    """The checks read both folders' weights in several ways (checked, the rules' reading, the fc's
    width): each file's header is opened once."""
    from sglang_eagle3_embed.core.readers import model_folder

    target, draft = pair_folders(tmp_path, ids=[-1, 2, 4], fc_captures=3)
    opened = []
    real = model_folder._open
    monkeypatch.setattr(model_folder, "_open", lambda file, what: opened.append(file) or real(file, what))
    no_model_loads(monkeypatch)
    with pytest.raises(AssertionError, match="a model loaded before the inputs were checked"):
        probe_folders(ProbeRequest(target, draft))
    headers = [f for f in opened if f.suffix == ".safetensors"]
    assert sorted(headers) == sorted(set(headers)) and {f.parent for f in headers} == {target, draft}
