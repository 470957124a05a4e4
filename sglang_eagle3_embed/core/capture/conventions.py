"""How the trainers of published EAGLE-3 drafts number their aux layer ids, and what a list of ids
means under each numbering. Pure module.

Two numberings are in use, and a list without ``-1`` does not say which one it is in:

- **layer outputs** (id ``k`` = the output of layer ``k``): SpecForge and TorchSpec, whose target
  capture goes through SGLang's ``set_eagle3_layers_to_capture`` and which write the ids in
  ``eagle_config``; their default for a draft config without ids is ``[1, L//2 - 1, L - 4]``
  (SpecForge ``specforge/algorithms/model_providers.py:188-211``, TorchSpec
  ``torchspec/utils/misc.py:76-88``);
- **HF hidden states** (id ``j`` = ``hidden_states[j]``, 0 the embedding output): vLLM and
  speculators, which write the ids at the top level of the draft config, default
  ``[2, L//2, L - 3]`` (speculators ``src/speculators/models/utils.py:40-57``); TorchSpec's export
  for vLLM adds 1 to Kimi-K2 drafts' ids to match (``tools/convert_to_hf.py:151-157``).

The two defaults name the same tensors, and they are SGLang's own defaults (capture indices
``[2, L//2, L - 3]``, ``srt/models/deepseek_v2.py:3462-3465``). A list that equals a trainer's
default where that trainer writes it is read right by stock SGLang; any other undeclared list may
be read one layer off, and only the weights can tell (``probe``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sglang_eagle3_embed.core.capture.ids import (
    CONVENTION_FIELD,
    IDS_FIELD,
    Convention,
    describe_capture_indices,
    id_to_capture_index,
)

__all__ = ["TRAINERS", "Trainer", "default_of", "missing_advice", "undeclared_advice"]

NESTED = "eagle_config"
PROBE = (
    "sglang-eagle3-embed probe --target TARGET --draft DRAFT tells which layers the weights were trained on"
)


@dataclass(frozen=True)
class Trainer:
    name: str
    convention: Convention
    source: str
    """Where it writes the ids: ``eagle_config`` or ``top level``."""
    default: Callable[[int], tuple[int, ...]]

    def writes(self, source: str) -> bool:
        return source == self.source


TRAINERS = (
    Trainer("SpecForge and TorchSpec", Convention.LAYER_OUTPUT, NESTED, lambda n: (1, n // 2 - 1, n - 4)),
    Trainer("speculators and vLLM", Convention.HIDDEN_STATES, "top level", lambda n: (2, n // 2, n - 3)),
)


def default_of(ids, source: str, num_layers: int) -> Trainer | None:
    """The trainer whose default for ``num_layers`` layers ``ids`` are, written where it writes
    them; None otherwise."""
    if ids is None:
        return None
    return next((t for t in TRAINERS if t.writes(source) and tuple(ids) == t.default(num_layers)), None)


def _as(ids, convention: Convention) -> str:
    return describe_capture_indices([id_to_capture_index(i, convention) for i in ids])


def undeclared_advice(ids, num_layers: int, reader: str, captured) -> str:
    """The warning for ids without ``-1`` and without a declared convention: how ``reader`` reads
    them (``captured``: capture indices), what they name in each numbering, what to declare, and
    how ``probe`` settles it."""
    ids = list(ids)
    return (
        f"{IDS_FIELD} = {ids} has no -1 and the config declares no {CONVENTION_FIELD}; {reader} reads "
        f"them as [{describe_capture_indices(captured)}]. Numbered as layer outputs (SpecForge, TorchSpec) "
        f"they name [{_as(ids, Convention.LAYER_OUTPUT)}]; as HF hidden states (vLLM, speculators) "
        f"[{_as(ids, Convention.HIDDEN_STATES)}]. Declare the one the draft was trained with, "
        f'"{NESTED}": {{"{CONVENTION_FIELD}": "layer_output"}} or "hidden_states"; {PROBE}.'
    )


def missing_advice(num_layers: int, captured) -> str:
    """The warning for a draft config without ids: the default layers, which the trainers' own
    defaults coincide with, and the fix that keeps a working launch working."""
    spec = TRAINERS[0].default(num_layers)
    return (
        f"the draft config has no {IDS_FIELD} (neither in {NESTED} nor at the top level); capturing "
        f"SGLang's default [{describe_capture_indices(captured)}], the layers SpecForge, TorchSpec and "
        f"speculators train on when they are given none. A draft trained on other layers is fed the "
        f"wrong tensors silently: write the ids it was trained on (for those defaults "
        f'"{NESTED}": {{"{IDS_FIELD}": {list(spec)}}}, which stock SGLang reads the same); {PROBE}.'
    )
