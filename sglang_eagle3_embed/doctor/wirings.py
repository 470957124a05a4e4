"""The wirings the wiring doctor compares: every way a server could feed this draft (pure).

A wiring is the ordered list of target tensors (capture indices: 0 = embedding output, ``i`` =
output of layer ``i-1``) concatenated into the draft's fc. :func:`candidate_wirings` lists the
plugin's reading of the draft config, stock SGLang 0.5.23's, and the readings a neighbouring
convention or a slip would give: every layer moved by one, each one moved alone, the embedding
replaced or dropped. They come from the ids themselves when the plugin refuses the config.
Deduplicated: a wiring reached several ways keeps every name, each with the kind of reading that
gave it (:class:`sglang_eagle3_embed.core.canary.expectations.Kind`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sglang_eagle3_embed.core.canary.expectations import Kind
from sglang_eagle3_embed.core.capture.draft_config import DraftIds, read_draft_ids, resolve_capture_plan
from sglang_eagle3_embed.core.capture.ids import Convention, describe_capture_indices, stock_capture_indices
from sglang_eagle3_embed.core.capture.stock_sglang import stock_reading
from sglang_eagle3_embed.core.errors import DraftConfigError

__all__ = ["DEFAULTS", "LITERAL", "PLUGIN", "STOCK", "Wiring", "candidate_wirings"]

PLUGIN = "plugin"
STOCK = "stock SGLang"
DEFAULTS = "SGLang's default layers"
LITERAL = ("ids as layer outputs", "ids as HF hidden_states")
"""The names of the config's ids read literally (present whenever the config names ids)."""


@dataclass(frozen=True)
class Wiring:
    names: tuple[str, ...]
    indices: tuple[int, ...] | None
    """None: this reading does not serve at all (``failure`` says why)."""
    failure: str | None = None
    kinds: tuple[str, ...] = ()
    """One per name: the kind of reading that gave it."""

    @property
    def name(self) -> str:
        return " = ".join(self.names)

    def describe(self) -> str:
        return self.failure if self.indices is None else describe_capture_indices(self.indices)

    @property
    def reads_defaults_only(self) -> bool:
        """This reading takes no ids from the config: SGLang's default layers, which say nothing
        about what the draft was trained on (the config names no ids, or a reader ignores them)."""
        return DEFAULTS in self.names and not set(self.names) & set(LITERAL)


def _valid(indices, num_layers: int, width: int) -> bool:
    return len(indices) == width and len(set(indices)) == width and all(0 <= i < num_layers for i in indices)


def _draft_ids(config: Mapping) -> DraftIds:
    """What the config says, or nothing where it is malformed (the plugin's line says why)."""
    try:
        return read_draft_ids(config)
    except DraftConfigError:
        return DraftIds(None, "", None, True, 3)


def _literal(draft: DraftIds) -> tuple[int, ...] | None:
    """The ids read in the convention they declare or imply (layer outputs unless they declare
    ``hidden_states``), whether or not the plugin accepts them."""
    if draft.ids is None:
        return None
    if draft.declared is Convention.HIDDEN_STATES and -1 not in draft.ids:
        return tuple(draft.ids)
    return tuple(i + 1 for i in draft.ids)


def _layer(index: int) -> str:
    return "embedding" if index == 0 else f"layer {index - 1}"


def _readings(config: Mapping, num_layers: int, width: int):
    """(name, kind, indices or None, failure) in the order the report lists them."""
    try:
        plan = resolve_capture_plan(config, num_layers)
        plugin = tuple(plan.indices)
        yield PLUGIN, Kind.PLUGIN, plugin, None
    except DraftConfigError as exc:
        plugin = None
        yield PLUGIN, Kind.PLUGIN, None, f"refuses to start: {exc}"
    stock = stock_reading(config, num_layers, width=width)
    yield STOCK, Kind.STOCK, stock.indices, None if stock.serves else stock.outcome

    draft = _draft_ids(config)
    ids = draft.ids
    if ids is not None:
        if -1 not in ids:
            yield LITERAL[1], Kind.LITERAL, tuple(ids), None
        yield LITERAL[0], Kind.LITERAL, tuple(i + 1 for i in ids), None
        yield (
            "stock's first-id heuristic",
            Kind.STOCK,
            tuple(stock_capture_indices(list(ids), num_layers)),
            None,
        )
    if width == 3:
        yield DEFAULTS, Kind.DEFAULTS, tuple(stock_capture_indices(None, num_layers)), None
    # the neighbours of what the config describes: the plugin's reading, or, where the plugin
    # refuses the config, the ids read literally (candidates outside the target are dropped later)
    base = plugin if plugin is not None else _literal(draft)
    if base is None:
        return
    layers = [i for i in base if i != 0]
    for delta, label in ((-1, "layers off by one (earlier)"), (1, "layers off by one (later)")):
        yield label, Kind.CONVENTION, tuple(i if i == 0 else i + delta for i in base), None
    if 0 in base:
        yield (
            "layer 0's output for the embedding",
            Kind.CONVENTION,
            tuple(1 if i == 0 else i for i in base),
            None,
        )
        tail = max(layers, default=0) + 1
        yield "embedding dropped, layers shifted left", Kind.CONVENTION, (*layers, tail), None
    for slot, index in enumerate(base):
        for moved in (index - 1, index + 1):
            if index == 0 or moved == 0:
                continue  # the embedding's own neighbour is named above
            wiring = (*base[:slot], moved, *base[slot + 1 :])
            yield f"{_layer(index)} read as {_layer(moved)}", Kind.CONVENTION, wiring, None
    if list(base) != sorted(base):
        yield "packed in ascending order", Kind.OTHER, tuple(sorted(base)), None


def candidate_wirings(config: Mapping, num_layers: int, width: int | None = None) -> list[Wiring]:
    """Distinct wirings for a draft config and a target with ``num_layers`` layers (plugin first).
    ``width``: how many captures the draft reads (its fc's width; else the config's count)."""
    if width is None:
        width = _draft_ids(config).draft_num_aux
    merged: dict[tuple[int, ...] | str, Wiring] = {}
    for name, kind, indices, failure in _readings(config, num_layers, width):
        if indices is not None and not _valid(indices, num_layers, width):
            continue
        key = indices if indices is not None else name
        if key in merged:
            old = merged[key]
            if name not in old.names:
                merged[key] = Wiring((*old.names, name), old.indices, old.failure, (*old.kinds, kind))
        else:
            merged[key] = Wiring((name,), indices, failure, (kind,))
    return list(merged.values())
