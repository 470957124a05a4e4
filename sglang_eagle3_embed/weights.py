"""Read a model folder's ``*.safetensors`` into one state dict (torch + safetensors)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["read_safetensors"]


def read_safetensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} has no *.safetensors weights")
    weights = {}
    for file in files:
        weights.update(load_file(file))
    return weights
