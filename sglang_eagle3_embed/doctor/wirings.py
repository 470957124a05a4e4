"""The wirings the wiring doctor compares: every way a server could feed this draft (pure).

A wiring is the ordered list of target tensors (capture indices: 0 = embedding output, ``i`` =
output of layer ``i-1``) concatenated into the draft's fc. :func:`candidate_wirings` lists the
plugin's reading of the draft config, stock SGLang 0.5.23's, and the readings a neighbouring
convention or a slip would give, deduplicated (a wiring reached several ways keeps every name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sglang_eagle3_embed.core.draft_config import read_draft_ids, resolve_capture_plan, stock_reading
from sglang_eagle3_embed.core.errors import DraftConfigError
from sglang_eagle3_embed.core.ids import describe_capture_indices, stock_capture_indices

__all__ = ["PLUGIN", "STOCK", "Wiring", "candidate_wirings"]

PLUGIN = "plugin"
STOCK = "stock SGLang"


@dataclass(frozen=True)
class Wiring:
    names: tuple[str, ...]
    indices: tuple[int, ...] | None
    """None: this reading does not serve at all (``failure`` says why)."""
    failure: str | None = None

    @property
    def name(self) -> str:
        return " = ".join(self.names)

    def describe(self) -> str:
        return self.failure if self.indices is None else describe_capture_indices(self.indices)


def _valid(indices, num_layers: int, width: int) -> bool:
    return len(indices) == width and len(set(indices)) == width and all(0 <= i < num_layers for i in indices)


def _readings(config: Mapping, num_layers: int, width: int):
    """(name, indices or None, failure) in the order the report lists them."""
    try:
        plan = resolve_capture_plan(config, num_layers)
        plugin = tuple(plan.indices)
        yield PLUGIN, plugin, None
    except DraftConfigError as exc:
        plugin = None
        yield PLUGIN, None, f"refuses to start: {exc}"
    stock_indices, outcome = stock_reading(config, num_layers)
    if outcome.startswith("serves") and len(stock_indices) == width:
        yield STOCK, tuple(stock_indices), None
    else:
        failure = outcome if not outcome.startswith("serves") else f"fc shape mismatch: {outcome}"
        yield STOCK, None, failure

    ids = read_draft_ids(config).ids
    if ids is not None:
        if -1 not in ids:
            yield "ids as HF hidden_states", tuple(ids), None
        yield "ids as layer outputs", tuple(i + 1 for i in ids), None
        yield "stock's first-id heuristic", tuple(stock_capture_indices(list(ids), num_layers)), None
    if width == 3:
        yield "SGLang's default layers", tuple(stock_capture_indices(None, num_layers)), None
    if plugin is None:
        return
    layers = [i for i in plugin if i != 0]
    for delta, label in ((-1, "layers off by one (earlier)"), (1, "layers off by one (later)")):
        yield label, tuple(i if i == 0 else i + delta for i in plugin), None
    if 0 in plugin:
        yield "layer 0's output for the embedding", tuple(1 if i == 0 else i for i in plugin), None
        tail = max(layers, default=0) + 1
        yield "embedding dropped, layers shifted left", (*layers, tail), None
    if list(plugin) != sorted(plugin):
        yield "packed in ascending order", tuple(sorted(plugin)), None


def candidate_wirings(config: Mapping, num_layers: int) -> list[Wiring]:
    """Distinct wirings for a draft config and a target with ``num_layers`` layers (plugin first)."""
    width = read_draft_ids(config).draft_num_aux
    merged: dict[tuple[int, ...] | str, Wiring] = {}
    for name, indices, failure in _readings(config, num_layers, width):
        if indices is not None and not _valid(indices, num_layers, width):
            continue
        key = indices if indices is not None else name
        if key in merged:
            old = merged[key]
            if name not in old.names:
                merged[key] = Wiring((*old.names, name), old.indices, old.failure)
        else:
            merged[key] = Wiring((name,), indices, failure)
    return list(merged.values())
