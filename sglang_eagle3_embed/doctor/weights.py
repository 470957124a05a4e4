"""Read a model folder's weights into one state dict (torch + safetensors): the files
:func:`~sglang_eagle3_embed.core.readers.model_folder.weight_files` names (the index's shards, else every
``*.safetensors``)."""

from __future__ import annotations

from pathlib import Path

from sglang_eagle3_embed.core.readers.model_folder import weight_files

__all__ = ["read_safetensors", "read_tensor"]


def read_safetensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    files = weight_files(folder)
    if not files:
        raise FileNotFoundError(f"{folder} has no *.safetensors weights")
    weights = {}
    for file in files:
        weights.update(load_file(file))
    return weights


def read_tensor(folder: Path, suffix: str):
    """The one tensor whose name ends with ``suffix``, read without loading the rest (a large
    target's checkpoint does not fit in host memory)."""
    from safetensors import safe_open

    for file in weight_files(folder):
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 (safe_open has keys(), no __iter__)
                if name.endswith(suffix):
                    return f.get_tensor(name)
    raise KeyError(f"{folder}: no tensor named *{suffix} in its *.safetensors")
