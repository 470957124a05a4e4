"""Read a model folder's ``*.safetensors`` into one state dict (torch + safetensors)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["read_safetensors", "read_tensor"]


def read_safetensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    files = sorted(Path(folder).glob("*.safetensors"))
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

    for file in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 (safe_open has keys(), no __iter__)
                if name.endswith(suffix):
                    return f.get_tensor(name)
    raise KeyError(f"{folder}: no tensor named *{suffix} in its *.safetensors")
