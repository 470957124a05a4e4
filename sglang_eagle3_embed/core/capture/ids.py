"""EAGLE-3 aux layer id conventions, and their translation to SGLang capture indices.

Pure module: imports neither torch nor sglang.

One physical tensor, many names. For a target with ``L`` decoder layers:

=============================  ==========================  ============================
physical tensor                ``layer_output`` id         ``hidden_states`` id
=============================  ==========================  ============================
embedding output               ``-1``                      ``0``
output of layer ``k``          ``k``                       ``k + 1``
=============================  ==========================  ============================

SGLang's DeepSeek models capture the *input* of layer ``i`` (the residual stream before
layer ``i``, ``srt/models/deepseek_v2.py:3175-3197``), so a **capture index** equals the
``hidden_states`` id (HF ``output_hidden_states`` index, vLLM boundary index): index 0 is
the embedding output and index ``i`` is the output of layer ``i - 1``. Index ``L`` (the
output of the last layer) has no capture point on the DeepSeek family in 0.5.23.

Stock SGLang 0.5.23 guesses: ids whose first element is ``1`` are shifted by ``+1``,
anything else is used as capture indices as-is, and missing ids default to
``[2, L // 2, L - 3]`` (``srt/models/deepseek_v2.py:3458-3473``). :func:`stock_capture_indices`
reproduces that guess so that the plugin can say what stock SGLang would capture.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from sglang_eagle3_embed.core.errors import DraftConfigError, shown
from sglang_eagle3_embed.core.rule_ids import DRAFT_IDS_CONVENTION, DRAFT_IDS_INVALID

__all__ = [
    "CONVENTION_FIELD",
    "IDS_FIELD",
    "Convention",
    "capture_index_to_id",
    "describe_capture_index",
    "describe_capture_indices",
    "id_to_capture_index",
    "parse_convention",
    "stock_capture_indices",
    "validate_ids",
]

IDS_FIELD = "eagle_aux_hidden_state_layer_ids"
"""The draft-config field that holds the aux layer ids (nested in ``eagle_config`` or top level)."""

CONVENTION_FIELD = "eagle_aux_hidden_state_layer_ids_convention"
"""The draft-config field that declares what the ids mean (values: :class:`Convention`)."""


class Convention(str, Enum):
    """What a draft's aux layer ids mean."""

    LAYER_OUTPUT = "layer_output"
    """Id ``k`` is the output of decoder layer ``k`` (0-based); ``-1`` is the embedding output.
    The convention of EAGLE-3 trainers that write ``cat([embed, out_a, out_b])`` as ``[-1, a, b]``."""

    HIDDEN_STATES = "hidden_states"
    """Id ``j`` is HF ``output_hidden_states[j]`` (the vLLM boundary index): ``0`` is the
    embedding output, ``j`` the output of layer ``j - 1``."""

    SGLANG_STOCK = "sglang_stock"
    """Not declarable: stock SGLang 0.5.23's first-id heuristic, kept for configs that neither
    contain ``-1`` nor declare a convention."""


DECLARABLE = (Convention.LAYER_OUTPUT, Convention.HIDDEN_STATES)


def parse_convention(value: object, *, where: str) -> Convention:
    """Parse a declared convention; raise :class:`DraftConfigError` naming the allowed values."""
    allowed = ", ".join(repr(c.value) for c in DECLARABLE)
    if isinstance(value, str):
        for convention in DECLARABLE:
            if value == convention.value:
                return convention
    raise DraftConfigError(
        f"{where}{CONVENTION_FIELD} is {shown(value)}; it must be one of {allowed}. "
        f"Use 'layer_output' when id k means the output of layer k and -1 the embedding "
        f"output, 'hidden_states' when id j means HF output_hidden_states[j] (0 = embedding).",
        rule=DRAFT_IDS_CONVENTION,
    )


def id_to_capture_index(layer_id: int, convention: Convention) -> int:
    """Capture index (input of layer i; 0 = embedding output) of one id."""
    if convention is Convention.LAYER_OUTPUT:
        return layer_id + 1
    if convention is Convention.HIDDEN_STATES:
        return layer_id
    raise ValueError(f"{convention} maps a whole id list, use stock_capture_indices()")


def capture_index_to_id(index: int, convention: Convention) -> int:
    """Inverse of :func:`id_to_capture_index`."""
    if convention is Convention.LAYER_OUTPUT:
        return index - 1
    if convention is Convention.HIDDEN_STATES:
        return index
    raise ValueError(f"{convention} has no per-id inverse")


def id_range(convention: Convention, num_layers: int) -> tuple[int, int]:
    """Inclusive range of ids whose tensor the DeepSeek family can capture."""
    if convention is Convention.LAYER_OUTPUT:
        return -1, num_layers - 2
    return 0, num_layers - 1


def stock_capture_indices(layer_ids: Sequence[int] | None, num_layers: int) -> list[int]:
    """What stock SGLang 0.5.23 puts in ``layers_to_capture`` (``deepseek_v2.py:3458-3473``)."""
    if layer_ids is None:
        return [2, num_layers // 2, num_layers - 3]
    if layer_ids and layer_ids[0] == 1:
        return [v + 1 for v in layer_ids]
    return list(layer_ids)


def describe_capture_index(index: int) -> str:
    """Name the physical tensor behind a capture index."""
    if index == 0:
        return "embedding output"
    if index > 0:
        return f"output of layer {index - 1}"
    return f"nothing (index {index} matches no layer)"


def describe_capture_indices(indices: Sequence[int], limit: int = 8) -> str:
    """``'embedding output, output of layer 2, output of layer 30'``; past ``limit`` entries, the
    first ones and the count."""
    named = ", ".join(describe_capture_index(i) for i in list(indices)[:limit])
    return named if len(indices) <= limit else f"{named}, ... ({len(indices)} in all)"


def validate_ids(value: object, *, where: str) -> tuple[int, ...]:
    """Check that ``value`` is a non-empty list of distinct integers; return it as a tuple.

    ``where`` prefixes messages with the location of the field (e.g. ``"eagle_config."``).
    """
    field = f"{where}{IDS_FIELD}"
    if not isinstance(value, (list, tuple)):
        raise DraftConfigError(
            f"{field} is {shown(value)}; it must be a list of integer layer ids, "
            f"e.g. [-1, 2, 30] for cat([embedding output, output of layer 2, output of layer 30]).",
            rule=DRAFT_IDS_INVALID,
        )
    if not value:
        raise DraftConfigError(
            f"{field} is empty; list the layers the draft was trained on, e.g. [-1, 2, 30].",
            rule=DRAFT_IDS_INVALID,
        )
    bad = [v for v in value if isinstance(v, bool) or not isinstance(v, int)]
    if bad:
        raise DraftConfigError(
            f"{field} = {shown(value)} contains non-integer entries {shown(bad)}; "
            f"write each layer id as a JSON integer.",
            rule=DRAFT_IDS_INVALID,
        )
    seen: set[int] = set()
    dups = sorted({v for v in value if v in seen or seen.add(v)})
    if dups:
        raise DraftConfigError(
            f"{field} = {shown(value)} repeats {shown(dups)}; each captured tensor must be listed "
            f"once, in the order the draft was trained on.",
            rule=DRAFT_IDS_INVALID,
        )
    return tuple(value)
