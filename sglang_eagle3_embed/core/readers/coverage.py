"""Which decoder layers a checkpoint's weights hold against the layers its config builds. Pure
module: ``check``'s rules (``target-layer-count``, ``draft-layer-count``) compare them here, and
``probe`` refuses through those rules before a model loads.

SGLang builds every layer a config counts and loads only the tensors a checkpoint holds: a layer
the weights lack keeps its random initial values, one they hold beyond the count is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from sglang_eagle3_embed.core.errors import positive_int
from sglang_eagle3_embed.core.readers.model_folder import MTP_MODULES

__all__ = ["Coverage", "absent", "draft_layers", "target_coverage"]

MIDLAYER = ("midlayer.", "model.midlayer.")
DRAFT_LAYERS = ("layers.", "model.layers.")


class Coverage(NamedTuple):
    count: int
    """The decoder layers the config builds (``num_hidden_layers``)."""
    missing: tuple[range, ...]
    """Runs of layers the config builds (or that lie below a held one) that the weights lack."""
    extra: tuple[int, ...]
    """Layers the weights hold that the config does not build (MTP layers it allows excepted)."""
    plain: int
    """The decoder layers the weights hold: those before the first MTP layer."""

    @property
    def ok(self) -> bool:
        return not self.missing and not self.extra


def target_coverage(text: Mapping, layers: Mapping[int, frozenset[str]]) -> Coverage | None:
    """The target's layers (``model_folder.decoder_layers`` of its weights) against its text config:
    ``0 .. num_hidden_layers - 1``, then at most ``num_nextn_predict_layers`` MTP layers (known by
    ``eh_proj``, ``enorm``, ``hnorm``). None when the config has no positive integer
    ``num_hidden_layers`` (other rules name that)."""
    count = text.get("num_hidden_layers")
    if not positive_int(count):
        return None
    nextn = text.get("num_nextn_predict_layers")
    nextn = nextn if positive_int(nextn) else 0
    top = max(layers, default=-1) + 1
    missing = absent(max(count, top), layers)
    extra = tuple(i for i in layers if i >= count and not (i < count + nextn and layers[i] & MTP_MODULES))
    plain = next((i for i in layers if layers[i] & MTP_MODULES), top)
    return Coverage(count, missing, extra, plain)


def absent(count: int, held) -> tuple[range, ...]:
    """The runs of ``0 .. count - 1`` that ``held`` lacks, without listing them: a config may name
    any count."""
    runs, start = [], 0
    for i in sorted(i for i in held if i < count):
        if i > start:
            runs.append(range(start, i))
        start = i + 1
    if start < count:
        runs.append(range(start, count))
    return tuple(runs)


def draft_layers(names) -> frozenset[int]:
    """The decoder layers an EAGLE-3 draft's tensor ``names`` hold: ``midlayer.*`` is layer 0
    (SGLang loads it as ``layers.0``, ``srt/models/llama_eagle3.py:339``), ``layers.{i}.*`` layer i."""
    held = set()
    for name in names:
        if name.startswith(MIDLAYER):
            held.add(0)
            continue
        prefix = next((p for p in DRAFT_LAYERS if name.startswith(p)), None)
        index = name[len(prefix) :].partition(".")[0] if prefix else ""
        if index.isascii() and index.isdigit() and len(index) <= 9:
            held.add(int(index))
    return frozenset(held)
