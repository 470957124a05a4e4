"""What stock SGLang 0.5.23 does with a draft's aux layer ids on a given target. Pure module.

The answer is derived by running, on the config's own JSON values, the expressions SGLang runs, so
that strings, floats, NaN, nested lists and malformed ``eagle_config`` values behave as they do
in SGLang (``4.0 == 4`` matches a layer, ``"4"`` and NaN match none, ``"a" + 1`` raises):

1. The target reads the ids from the draft config
   (``model_runner_components/spec_aux_hidden_state.py:185-196``): ``eagle_config.get(
   "use_aux_hidden_state", True)``, then ``eagle_config["eagle_aux_hidden_state_layer_ids"]``;
   any exception gives ``None`` (its defaults). The top-level field is never read there.
2. ``configure_aux_hidden_state_capture`` (``attention_backend_setup.py:54-61``) calls the
   model's ``set_eagle3_layers_to_capture`` when ``use_aux_hidden_state`` is truthy.
3. The setter turns ids into capture indices (the input of layer ``i``; 0 = embedding output):

   - the DeepSeek family and GLM-4-MoE-Lite (``deepseek_v2.py:3458-3473``,
     ``glm4_moe_lite.py:805-821``; Kimi-K2.5 delegates to its DeepSeek-V3 text model): ``None``
     gives ``[2, L // 2, L - 3]``; ids whose first entry equals 1 get ``+1``; others are kept;
   - the add-one models (``llama.py:929-941``, ``qwen2.py``, ``qwen3.py`` and the others listed
     in :data:`ADD_ONE`): ``None`` gives the same defaults; every id gets ``+1``.

4. The layer loop captures at layer ``i`` when ``i in layers_to_capture``
   (``deepseek_v2.py:3175-3197``, ``llama.py:485-494``), ascending. The DeepSeek family packs
   them into a buffer sized for the whole list and fails on a shortfall (``captured k of n``,
   ``layers/aux_hidden_states.py:84-90``); the add-one models keep a plain list, and capture
   index 0, the embedding output, too (``layers/layer_boundary/stage.py:421-432``). A model that
   captures nothing returns a bare tensor, which its ``forward`` cannot unpack; a draft whose fc
   reads another number of tensors fails in its first matmul, except that a single capture has
   the hidden size and makes the draft skip its fc (``llama_eagle3.py:238``) without an error.
   The failures happen while the server starts (CUDA-graph capture runs the forward).

Other architectures have readings of their own (``docs/upstream/rfc-eagle3-layer-id-convention.md``);
for them the answer is "not modelled", never a guess.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from sglang_eagle3_embed import FAMILY
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD, describe_capture_indices, stock_capture_indices

__all__ = [
    "ADD_ONE",
    "FIRST_ID",
    "NO_EAGLE3",
    "StockReading",
    "draft_reads",
    "reading_of",
    "stock_reading",
    "target_ids",
]

NESTED = "eagle_config"

FIRST_ID = (*FAMILY, "Glm4MoeLiteForCausalLM")
"""Architectures whose setter is the first-id heuristic (``deepseek_v2.py:3458``)."""

ADD_ONE = (
    "ApertusForCausalLM",
    "BailingMoEForCausalLM",
    "BailingMoeForCausalLM",
    "BailingMoeV2ForCausalLM",
    "ExaoneMoEForCausalLM",
    "ExaoneMoeForCausalLM",
    "Glm4MoeForCausalLM",
    "InternLM3ForCausalLM",
    "IQuestCoderForCausalLM",
    "LlamaForCausalLM",
    "LongcatFlashForCausalLM",
    "MiniMaxM2ForCausalLM",
    "Phi3ForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
)
"""Architectures whose setter adds 1 to every id and whose loop captures indices ``0..L-1``
(Gemma 3 and 4 also capture index ``L`` and are left to the RFC's table)."""

NO_EAGLE3 = ("DeepseekV4ForCausalLM",)
"""Architectures without ``set_eagle3_layers_to_capture`` (DeepSeek-V4 has only
``set_dspark_layers_to_capture``, ``deepseek_v4.py:4853``): SGLang stops an EAGLE-3 draft on them
when the model loads (``attention_backend_setup.py:55-60``)."""

_SETTER = {"first-id": "deepseek_v2.py:3458-3473", "add-one": "llama.py:929-941"}


@dataclass(frozen=True)
class StockReading:
    """Stock SGLang's outcome for one draft config on one target."""

    architecture: str | None
    reading: str
    """``"first-id"``, ``"add-one"``, ``"none"`` (no EAGLE-3 capture) or ``"not modelled"``."""
    indices: tuple[int, ...] | None
    """The capture indices served, ascending (the order the loop packs them); None when the server
    does not serve this draft or the reading is not modelled."""
    outcome: str
    """Plain words: ``serves [...]``, ``fails at startup: ...``, ``captures nothing ...``, or
    ``not modelled: ...``."""

    @property
    def serves(self) -> bool:
        return self.indices is not None


def target_ids(config: object) -> tuple[bool, object]:
    """``(use_aux_hidden_state, ids)`` as stock SGLang's target reads them from the draft config
    (``spec_aux_hidden_state.py:185-196``): any exception leaves ``use_aux_hidden_state`` true and
    the ids ``None``."""
    use_aux: object = True
    try:
        eagle_config = config.get(NESTED) if isinstance(config, Mapping) else None
        use_aux = eagle_config.get("use_aux_hidden_state", True)
        return bool(use_aux), eagle_config[IDS_FIELD]
    except Exception:
        return bool(use_aux), None


def draft_reads(config: object) -> int | str:
    """How many tensors the draft's fc reads as stock SGLang's draft model computes it
    (``llama_eagle3.py:155-161``): ``num_aux_hidden_states``, else the nested ids' length when
    they are truthy, else 3. A string says why the draft model itself fails to build."""
    try:
        num_aux = config.get("num_aux_hidden_states") if isinstance(config, Mapping) else None
        if num_aux is None:
            eagle_config = (config.get(NESTED) if isinstance(config, Mapping) else None) or {}
            layer_ids = eagle_config.get(IDS_FIELD)
            num_aux = len(layer_ids) if layer_ids else 3
    except Exception as exc:
        return f"the draft model cannot size its fc ({type(exc).__name__}: {exc})"
    if not isinstance(num_aux, int):  # its fc is nn.Linear(hidden * num_aux, ...)
        return f"the draft model cannot size its fc (num_aux_hidden_states is {num_aux!r})"
    return int(num_aux)


def _setter(reading: str, ids: object, num_layers: int) -> list:
    """``layers_to_capture`` as the setter computes it (raises what it raises): the add-one models
    add 1 to every id; the defaults and the first-id heuristic are :func:`stock_capture_indices`."""
    if reading == "add-one" and ids is not None:
        return [val + 1 for val in ids]
    return stock_capture_indices(ids, num_layers)


def _captured(layers_to_capture: list, num_layers: int) -> list[int]:
    """The layers whose input the loop captures: every ``i`` in ``range(num_layers)`` with
    ``i in layers_to_capture``, ascending. An int equals an entry that is an int, a bool or an
    integral float (``4.0 == 4``, ``True == 1``); NaN, strings, lists and objects equal none. Walking
    the entries rather than the layers keeps a huge layer count or list cheap."""
    hits = set()
    for v in layers_to_capture:
        if isinstance(v, float) and (not math.isfinite(v) or not v.is_integer()):
            continue
        if isinstance(v, (int, float)) and 0 <= v < num_layers:
            hits.add(int(v))
    return sorted(hits)


def reading_of(architecture: str | None) -> str:
    """How stock SGLang's own model of ``architecture`` turns ids into capture indices:
    ``first-id``, ``add-one``, ``none`` or ``not modelled`` (None: the DeepSeek family)."""
    if architecture is None or architecture in FIRST_ID:
        return "first-id"
    if architecture in NO_EAGLE3:
        return "none"
    return "add-one" if architecture in ADD_ONE else "not modelled"


def stock_reading(
    config: object, num_layers: int, architecture: str | None = None, width: int | None = None
) -> StockReading:
    """What stock SGLang 0.5.23 serves for draft ``config`` on a target of ``architecture`` (None:
    the DeepSeek family, which the plugin serves) with ``num_layers`` layers. ``width``: how many
    tensors the draft's fc reads when its weights say so; else what the draft config implies."""
    reading = reading_of(architecture)
    if reading == "none":
        return StockReading(
            architecture,
            reading,
            None,
            f"fails at startup: {architecture} has no set_eagle3_layers_to_capture, so SGLang serves no "
            f"EAGLE-3 draft on it (attention_backend_setup.py:55-60)",
        )
    if reading == "not modelled":
        return StockReading(
            architecture,
            reading,
            None,
            f"not modelled: {architecture} has its own EAGLE-3 reading in SGLang 0.5.23; "
            f"see its set_eagle3_layers_to_capture",
        )

    def fails(why: str) -> StockReading:
        return StockReading(architecture, reading, None, f"fails at startup: {why}")

    use_aux, ids = target_ids(config)
    if not use_aux:
        return StockReading(
            architecture,
            reading,
            None,
            "captures nothing (eagle_config.use_aux_hidden_state is false): the draft's fc is "
            "skipped and it reads the final hidden state",
        )
    try:
        layers_to_capture = _setter(reading, ids, num_layers)
    except Exception as exc:
        return fails(f"{type(exc).__name__} in set_eagle3_layers_to_capture ({_SETTER[reading]}): {exc}")
    captured = _captured(layers_to_capture, num_layers)
    if not captured:
        return fails(
            "no listed index matches a layer, so the model returns no aux hidden states and its "
            "forward cannot unpack them (ValueError)"
        )
    if reading == "first-id" and len(captured) != len(layers_to_capture):
        return fails(f"RuntimeError: captured {len(captured)} of {len(layers_to_capture)} aux hidden states")
    reads = draft_reads(config) if width is None else width
    if isinstance(reads, str):
        return fails(reads)
    if len(captured) == 1 and reads != 1:
        return StockReading(
            architecture,
            reading,
            None,
            f"starts, but wrongly: one capture ({describe_capture_indices(captured)}) has the "
            f"hidden size, so the draft skips its fc (llama_eagle3.py:238) and reads it as its "
            f"input where it was trained on {reads} tensors",
        )
    if len(captured) != reads:
        return fails(
            f"the target captures {len(captured)} tensors but the draft's fc reads {reads} "
            f"(a shape mismatch in its first matmul)"
        )
    indices = tuple(captured)
    return StockReading(architecture, reading, indices, f"serves [{describe_capture_indices(indices)}]")
