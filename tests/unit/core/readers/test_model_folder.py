"""core.model_folder: the one reader of a model folder (command line, doctor, launch validation).

Synthetic folders in tmp_path: every way a folder can be unreadable ends in a ModelFolderError (an
InputError naming the file, what is wrong and the fix), never a traceback or a hang; configs, Kimi
text configs, index files and safetensors headers are read as the safetensors library reads them.
"""

import json
import os
import re
import struct
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.core.readers.model_folder import (
    DTYPE_BITS,
    INDEX,
    LAYER_PREFIX,
    MTP_MODULES,
    WRAPPED_LAYER_PREFIXES,
    ModelFolder,
    ModelFolderError,
    TensorInfo,
    config_file,
    decoder_layers,
    describe_layers,
    fc_in_features,
    headers_read_once,
    layer_count,
    layer_prefixes,
    looks_local,
    read_config,
    read_json,
    safetensors_header,
    text_config,
    weight_files,
)


def model(tmp_path, config=None, text=None, name="m"):
    folder = tmp_path / name
    folder.mkdir()
    if config is not None or text is not None:
        (folder / "config.json").write_text(text if text is not None else json.dumps(config))
    return folder


def safetensors_bytes(tensors: dict, *, gap: int = 0, extra: bytes = b"", header=None) -> bytes:
    """A safetensors file of zero-filled tensors: name -> (dtype, shape, itemsize)."""
    entries, offset = {}, 0
    for name, (dtype, shape, itemsize) in tensors.items():
        size = int(np.prod(shape, dtype=np.int64)) * itemsize
        entries[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset + gap, offset + gap + size],
        }
        offset += gap + size
    raw = json.dumps(header if header is not None else {"__metadata__": {"format": "pt"}, **entries}).encode()
    return struct.pack("<Q", len(raw)) + raw + bytes(offset) + extra


def failure(call, *args, **kwargs) -> str:
    with pytest.raises(ModelFolderError) as info:
        call(*args, **kwargs)
    assert isinstance(info.value, InputError)
    message = str(info.value)
    assert str(info.value.path) in message and "; " in message  # the file, then the fix
    return message


# ------------------------------------------------------------------ config.json


def test_reads_the_config_of_a_folder_or_of_its_file(tmp_path):
    folder = model(tmp_path, {"num_hidden_layers": 4})
    assert read_config(folder) == read_config(folder / "config.json") == {"num_hidden_layers": 4}
    assert config_file(folder) == folder / "config.json"
    assert ModelFolder.read(folder, "--target").config == {"num_hidden_layers": 4}


def test_any_json_returns_what_the_file_holds_for_the_rules_to_judge(tmp_path):
    folder = model(tmp_path, text="[-1, 2, 4]")
    assert read_config(folder, any_json=True) == [-1, 2, 4]
    assert "is not a JSON object but a list" in failure(read_config, folder, "draft config")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "is not valid JSON"),
        ("", "is not valid JSON"),
        ("1" * 5000, "is not valid JSON"),  # past Python's digit limit: a ValueError of its own
        ("[" * 100_000 + "]" * 100_000, "nests JSON too deeply"),
        ('{"a": 1}\n{"b": 2}', "is not valid JSON"),
    ],
)
def test_unparseable_json_is_an_input_error(tmp_path, text, expected):
    message = failure(read_config, model(tmp_path, text=text), "--target")
    assert expected in message and message.startswith("--target ") and "config.json" in message


def test_bytes_that_are_not_utf8_are_named(tmp_path):
    folder = model(tmp_path)
    (folder / "config.json").write_bytes(b'{"a": "\xff\xfe"}')
    assert "is not UTF-8 text" in failure(read_config, folder)


def test_missing_paths_and_folders_without_a_config(tmp_path):
    assert "no such file or folder" in failure(read_config, tmp_path / "nowhere")
    assert "has no config.json" in failure(read_config, model(tmp_path))
    (tmp_path / "file").write_text("{}")
    assert "is a file, not a model folder" in failure(ModelFolder.read, tmp_path / "file", "--draft")
    assert "no such file or folder" in failure(ModelFolder.read, tmp_path / "gone" / "x")
    assert "not a valid path" in failure(read_config, str(tmp_path / "a\0b"))


def test_symlink_loops_are_named(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop")
    assert "symlink loop" in failure(read_config, loop)
    assert "symlink loop" in failure(ModelFolder.read, loop)
    folder = model(tmp_path)
    (folder / "config.json").symlink_to(folder / "config.json")
    assert "symlink loop" in failure(read_config, folder)


def test_a_fifo_as_config_json_is_refused_without_blocking(tmp_path):
    folder = model(tmp_path)
    os.mkfifo(folder / "config.json")
    outcome = []

    def read():
        outcome.append(failure(read_config, folder))
        outcome.append(failure(read_json, folder / "config.json"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # unblock the reader before failing
        os.close(os.open(folder / "config.json", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO as config.json blocked")
    assert len(outcome) == 2 and all("is not a regular file but a FIFO" in m for m in outcome)


def test_a_folder_named_config_json_is_not_read(tmp_path):
    folder = model(tmp_path)
    (folder / "config.json").mkdir()
    assert "is not a regular file but a folder" in failure(read_config, folder)


# ------------------------------------------------------------------ text config, layers, widths


def test_text_config_is_the_nested_kimi_config_or_the_config_itself():
    kimi = {"architectures": ["KimiK25ForConditionalGeneration"], "text_config": {"num_hidden_layers": 61}}
    assert text_config(kimi) == {"num_hidden_layers": 61}
    assert layer_count(kimi, "k/config.json") == 61
    deepseek = {"num_hidden_layers": 7, "text_config": None}
    assert text_config(deepseek) is deepseek and layer_count(deepseek, "d/config.json") == 7


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ([1, 2], "is not a JSON object but a list"),
        ({"text_config": [1]}, "text_config is not a JSON object"),
        ({"num_hidden_layers": 4, "text_config": "x"}, "text_config is not a JSON object"),
        (
            {"text_config": {"hidden_size": 64}},
            "has no integer num_hidden_layers in its text_config (found None)",
        ),
        ({"num_hidden_layers": True}, "has no integer num_hidden_layers (found True)"),
        ({"num_hidden_layers": 0}, "has no integer num_hidden_layers (found 0)"),
        ({"num_hidden_layers": "7"}, "has no integer num_hidden_layers"),
    ],
)
def test_a_layer_count_that_cannot_be_read_is_an_input_error(config, expected):
    message = failure(layer_count, config, "t/config.json", "target config", "pass --num-layers N instead")
    assert expected in message and message.startswith("target config t/config.json: ")
    assert message.endswith("pass --num-layers N instead") == ("num_hidden_layers" in expected)


def test_a_model_folder_reads_its_widths_from_the_text_config(tmp_path):
    kimi = ModelFolder.read(
        model(tmp_path, {"architectures": ["Kimi"], "text_config": {"num_hidden_layers": 3, "vocab_size": 9}})
    )
    assert (kimi.num_layers, kimi.integer("vocab_size"), kimi.architectures) == (3, 9, ["Kimi"])
    assert "has no integer hidden_size in its text_config" in failure(kimi.integer, "hidden_size")
    assert failure(kimi.integer, "hidden_size", "pass --prompts FILE").endswith("pass --prompts FILE")
    odd = ModelFolder.read(model(tmp_path, {"architectures": "x", "text_config": 3}, name="odd"))
    assert odd.architectures == []
    assert "text_config is not a JSON object" in failure(lambda: odd.num_layers)


def test_looks_local_tells_folders_from_hub_ids(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert not looks_local("deepseek-ai/DeepSeek-V3")
    for path in ("/abs", "./rel", "~/m", "a/b/c", "a\\b"):
        assert looks_local(path)
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "name").mkdir()
    assert looks_local("org/name")  # exists here
    os.symlink("loop", tmp_path / "loop")
    assert looks_local("loop")  # a symlink loop is local too: reading it says so
    assert not looks_local("a\0b")


# ------------------------------------------------------------------ weights


F16 = ("F16", None, 2)


def fc(width: int, hidden: int = 4):
    return ("F16", (hidden, width), 2)


def test_header_lists_every_tensor_with_its_dtype_and_shape(tmp_path):
    file = tmp_path / "model.safetensors"
    file.write_bytes(safetensors_bytes({"fc.weight": fc(12), "norm.weight": ("F32", (4,), 4)}))
    assert safetensors_header(file) == {
        "fc.weight": TensorInfo("F16", (4, 12)),
        "norm.weight": TensorInfo("F32", (4,)),
    }


def test_inside_headers_read_once_a_file_is_opened_once(tmp_path, monkeypatch):
    """Inside the block each header is read once and every reader gets its own copy; a damaged file
    is read, and named, by every reader; outside the block, every read opens the file."""
    from sglang_eagle3_embed.core.readers import model_folder

    good, bad = tmp_path / "good.safetensors", tmp_path / "bad.safetensors"
    good.write_bytes(safetensors_bytes({"fc.weight": fc(12)}))
    bad.write_bytes(safetensors_bytes({"fc.weight": fc(12)})[:-1])
    opened = []
    real = model_folder._open
    monkeypatch.setattr(
        model_folder, "_open", lambda file, what: opened.append(file.name) or real(file, what)
    )
    with headers_read_once():
        first = safetensors_header(good)
        first.clear()
        assert safetensors_header(tmp_path / "." / "good.safetensors") == {
            "fc.weight": TensorInfo("F16", (4, 12))
        }
        for what in ("--draft", "--target"):
            assert what in failure(safetensors_header, bad, what)
    assert opened == ["good.safetensors", "bad.safetensors", "bad.safetensors"]
    safetensors_header(good)
    assert opened[-1] == "good.safetensors" and len(opened) == 4


def test_the_header_agrees_with_the_safetensors_library(tmp_path):
    from safetensors.numpy import save_file

    file = tmp_path / "model.safetensors"
    tensors = {
        "b": np.zeros((2, 3), np.float16),
        "a": np.ones(5, np.int64),
        "e": np.zeros((0, 4), np.float32),
    }
    save_file(tensors, str(file))
    assert safetensors_header(file) == {
        k: TensorInfo({"float16": "F16", "int64": "I64", "float32": "F32"}[str(v.dtype)], v.shape)
        for k, v in tensors.items()
    }


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(0, 400), tail=st.binary(max_size=3))
def test_a_damaged_file_fails_exactly_when_the_safetensors_library_fails(tmp_path_factory, cut, tail):
    from safetensors import safe_open
    from safetensors.numpy import save_file

    file = tmp_path_factory.mktemp("st") / "model.safetensors"
    save_file({"fc.weight": np.zeros((4, 12), np.float16), "x": np.zeros(3, np.float32)}, str(file))
    data = file.read_bytes()
    file.write_bytes(data[: max(0, len(data) - cut)] + tail)
    try:
        with safe_open(str(file), framework="numpy"):
            library_reads = True
    except Exception:
        library_reads = False
    try:
        safetensors_header(file)
        ours = True
    except ModelFolderError:
        ours = False
    assert ours == library_reads, (cut, tail)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", "holds 0 bytes, too few for a safetensors header"),
        (b"\x08\x00\x00\x00", "holds 4 bytes"),
        (struct.pack("<Q", 10**12) + b"{}", "declares a header of 1000000000000 bytes"),
        (struct.pack("<Q", 2) + b"[]", "header that is not a JSON object"),
        (struct.pack("<Q", 3) + b"{\xff}", "is not UTF-8"),
        (struct.pack("<Q", 3) + b"{x}", "is not valid JSON"),
        (safetensors_bytes({"fc.weight": fc(12)})[:-1], "holds 95 bytes of tensor data where its header describes 96 (truncated)"),
        (safetensors_bytes({"fc.weight": fc(12)}, extra=b"\0"), "holds 97 bytes of tensor data"),
        (safetensors_bytes({"fc.weight": fc(12)}, gap=2), "at byte 2 of its data where byte 0 comes next"),
        (safetensors_bytes({}, header={"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 2]}}), "with 2 bytes"),
        (safetensors_bytes({}, header={"w": {"dtype": "F16", "shape": [-1], "data_offsets": [0, 0]}}), "damaged header entry for 'w'"),
        (safetensors_bytes({}, header={"w": {"dtype": "F16", "shape": [1], "data_offsets": [2, 0]}}), "damaged header entry"),
        (safetensors_bytes({}, header={"w": [1]}), "damaged header entry"),
    ],
)  # fmt: skip
def test_a_damaged_safetensors_file_is_named_with_what_is_wrong(tmp_path, data, expected):
    file = tmp_path / "model.safetensors"
    file.write_bytes(data)
    message = failure(safetensors_header, file, "--draft")
    assert expected in message and "download the model again" in message


def test_a_dtype_safetensors_does_not_define_is_refused_as_safetensors_refuses_it(tmp_path):
    file = tmp_path / "model.safetensors"
    file.write_bytes(
        safetensors_bytes({}, header={"w": {"dtype": "F2", "shape": [8], "data_offsets": [0, 2]}}) + b"\0\0"
    )
    with pytest.raises(ModelFolderError, match="the dtype 'F2', which safetensors does not define"):
        safetensors_header(file)


def test_every_dtype_the_safetensors_library_reads_is_read(tmp_path):
    """The library names its dtypes in its error for an unknown one; each is read here too."""
    from safetensors import SafetensorError, safe_open

    file = tmp_path / "model.safetensors"
    file.write_bytes(
        safetensors_bytes({}, header={"w": {"dtype": "F2", "shape": [8], "data_offsets": [0, 2]}})
    )
    with pytest.raises(SafetensorError) as refused:
        safe_open(str(file), framework="numpy")
    named = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", str(refused.value))) - {"F2"}
    assert len(named) > 10, refused.value  # the message still lists the dtypes
    assert named <= set(DTYPE_BITS), sorted(named - set(DTYPE_BITS))


@pytest.mark.parametrize("metadata", [5, ["a"], {"a": 1}])
def test_metadata_that_is_not_an_object_of_strings_is_refused(tmp_path, metadata):
    file = tmp_path / "model.safetensors"
    file.write_bytes(safetensors_bytes({}, header={"__metadata__": metadata}))
    with pytest.raises(ModelFolderError, match="__metadata__ that is not an object of strings"):
        safetensors_header(file)


def sharded(tmp_path, shards: dict, weight_map=None):
    folder = model(tmp_path, {"architectures": ["LlamaForCausalLMEagle3"]}, name="draft")
    for name, tensors in shards.items():
        (folder / name).write_bytes(safetensors_bytes(tensors))
    weight_map = weight_map or {t: name for name, tensors in shards.items() for t in tensors}
    (folder / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


def test_fc_width_from_a_single_file_or_an_index_and_its_shards(tmp_path):
    single = model(tmp_path, {}, name="single")
    (single / "model.safetensors").write_bytes(safetensors_bytes({"model.fc.weight": fc(192)}))
    assert fc_in_features(single) == 192
    folder = sharded(
        tmp_path, {"a.safetensors": {"norm": ("F32", (4,), 4)}, "b.safetensors": {"fc.weight": fc(96)}}
    )
    (folder / "stray.safetensors").write_bytes(b"not read: the index names the shards")
    assert weight_files(folder) == [folder / "a.safetensors", folder / "b.safetensors"]
    assert fc_in_features(folder) == 96
    assert fc_in_features(model(tmp_path, {}, name="bare")) is None  # no weights: nothing to read


def test_every_shard_is_read_even_those_without_the_fc(tmp_path):
    folder = sharded(
        tmp_path, {"a.safetensors": {"norm": ("F32", (4,), 4)}, "b.safetensors": {"fc.weight": fc(96)}}
    )
    (folder / "a.safetensors").write_bytes((folder / "a.safetensors").read_bytes()[:-1])
    assert "a.safetensors" in failure(fc_in_features, folder)


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        ("{not json", "is not valid JSON"),
        ('{"weight_map": [1]}', "has no weight_map object"),
        ('{"weight_map": {"fc.weight": "../b.safetensors"}}', "names a shard '../b.safetensors'"),
        ('{"weight_map": {"fc.weight": 3}}', "names a shard '3'"),
        ('{"weight_map": {"fc.weight": "model-00002-of-00002.safetensors"}}', "is missing (named by"),
    ],
)
def test_a_damaged_index_is_named(tmp_path, index, expected):
    folder = model(tmp_path, {})
    (folder / INDEX).write_text(index)
    message = failure(weight_files, folder, "--draft")
    assert expected in message
    if "missing" in expected:
        assert str(folder / "model-00002-of-00002.safetensors") in message


def test_a_model_folder_checks_every_weight_file(tmp_path):
    folder = ModelFolder.read(model(tmp_path, {}), "--target")
    assert "has no *.safetensors weights" in failure(folder.check_weights)
    (folder.path / "model.safetensors").write_bytes(safetensors_bytes({"fc.weight": fc(8, 2)}))
    assert folder.check_weights() == {"fc.weight": TensorInfo("F16", (2, 8))}
    assert fc_in_features(folder.path) == 8
    (folder.path / "model.safetensors").write_bytes(safetensors_bytes({"fc.weight": ("F16", (16,), 2)}))
    assert "not 2-D" in failure(fc_in_features, folder.path)


# ------------------------------------------------------------------ tensor names and decoder layers


def test_decoder_layers_are_the_indices_of_the_layer_names_with_their_modules():
    names = [
        "model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
        "model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.down_proj.weight",
        "model.layers.1.mlp.experts.3.up_proj.weight", "model.layers.1.mlp.gate.e_score_correction_bias",
        "model.layers.10.input_layernorm.weight",
        "model.layers.61.eh_proj.weight", "model.layers.61.enorm.weight", "model.layers.61.hnorm.weight",
        "model.layers.61.shared_head.head.weight",
        # not a layer: no index, no module after it, a non-ASCII digit, an index of 10 digits
        "model.layers.x.mlp.weight", "model.layers.3", "model.layers.\u0663.mlp.weight",
        "model.layers.1234567890.mlp.weight", "language_model.model.layers.5.mlp.weight",
    ]  # fmt: skip
    layers = decoder_layers(names)
    assert list(layers) == [0, 1, 10, 61]
    assert layers[0] == {"self_attn", "mlp"} and layers[1] == {"mlp"}
    assert layers[61] & MTP_MODULES == {"eh_proj", "enorm", "hnorm"} and "shared_head" in layers[61]
    assert not layers[0] & MTP_MODULES
    assert decoder_layers([]) == {}


def test_a_kimi_wrapper_keeps_its_text_layers_under_language_model():
    deepseek = {"num_hidden_layers": 2}
    kimi = {"text_config": {"num_hidden_layers": 2}, "vision_config": {"num_hidden_layers": 27}}
    assert layer_prefixes(deepseek) == (LAYER_PREFIX,)
    assert layer_prefixes(kimi) == WRAPPED_LAYER_PREFIXES
    names = [
        "language_model.model.layers.0.mlp.gate_proj.weight",
        "language_model.layers.1.self_attn.o_proj.weight",  # NVFP4 exports
        "vision_tower.encoder.blocks.0.wqkv.weight", "mm_projector.proj.0.weight",
        "model.layers.7.mlp.weight",  # not the wrapper's text model
    ]  # fmt: skip
    assert decoder_layers(names, layer_prefixes(kimi)) == {0: {"mlp"}, 1: {"self_attn"}}
    assert decoder_layers(names, layer_prefixes(deepseek)) == {7: {"mlp"}}


@pytest.mark.parametrize(
    ("indices", "expected"),
    [
        (range(7), "layers 0-6"),
        ([6, 0, 1, 2, 4, 5], "layers 0-2, 4-6"),
        ([3], "layer 3"),
        ([7, 9], "layers 7, 9"),
        ([0, 1, 61], "layers 0-1, 61"),
        ([], "no decoder layers"),
    ],
)
def test_layers_are_described_as_runs(indices, expected):
    assert describe_layers(indices) == expected


def test_an_index_that_names_no_shard_is_refused(tmp_path):
    folder = model(tmp_path, {"architectures": ["LlamaForCausalLMEagle3"]}, name="draft")
    (folder / "model.safetensors.index.json").write_text('{"weight_map": {}}')
    with pytest.raises(ModelFolderError, match="names no shard"):
        weight_files(folder)
