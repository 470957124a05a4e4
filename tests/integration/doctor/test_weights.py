"""Checkpoint reading: whole folders for tiny models, single tensors for the engine backend."""

import pytest
import torch
from safetensors.torch import save_file

from sglang_eagle3_embed.doctor.weights import read_safetensors, read_tensor


def test_reads_sharded_folders(tmp_path):
    save_file({"model.layers.0.w": torch.ones(2)}, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file(
        {"model.embed_tokens.weight": torch.arange(6.0).view(3, 2)},
        str(tmp_path / "model-00002-of-00002.safetensors"),
    )
    assert set(read_safetensors(tmp_path)) == {"model.layers.0.w", "model.embed_tokens.weight"}
    assert torch.equal(read_tensor(tmp_path, "embed_tokens.weight"), torch.arange(6.0).view(3, 2))
    with pytest.raises(KeyError, match="no tensor named"):
        read_tensor(tmp_path, "lm_head.weight")
    with pytest.raises(FileNotFoundError, match=r"no \*\.safetensors"):
        read_safetensors(tmp_path / "empty")
