"""The GPU acceptance runs by name: what ``tests/gpu/test_acceptance.py`` serves and
``benchmarks/acceptance_table.py`` tabulates, written once for both."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_eagle3_embed.core.capture.ids import stock_capture_indices
from sglang_eagle3_embed.doctor.pair import GPU_PAIR

TRAINED = tuple(i + 1 for i in GPU_PAIR.ids)
"""Capture indices of the GPU draft's ids."""
DEFAULTS = tuple(stock_capture_indices(None, GPU_PAIR.target.num_layers))
"""SGLang's default layers for the GPU target."""
OFFLINE = "offline.json"
"""The offline predictions the test leaves beside the engine results: ``{steps: {wiring: accept}}``."""


def offline_key(indices: tuple[int, ...]) -> str:
    """How :data:`OFFLINE` names a wiring."""
    return ",".join(map(str, indices))


@dataclass(frozen=True)
class Run:
    name: str
    """The engine's name: its result is ``<name>.json``, its log ``<name>.log``."""
    label: str
    offline_steps: int | None = None
    """The chain length whose offline prediction the run is compared with."""
    offline_wiring: tuple[int, ...] | None = None


PLUGIN = {
    (steps, topk): Run(f"plugin-steps{steps}-topk{topk}", label, steps, TRAINED)
    for steps, topk, label in (
        (3, 1, "plugin, steps 3, top-k 1"),
        (7, 1, "plugin, steps 7, top-k 1"),
        (3, 4, "plugin, steps 3, top-k 4, 8 draft tokens"),
    )
}
"""The plugin with the trained draft, by (steps, top-k); top-k 4 is compared with the top-k 1 chain."""
STOCK_NESTED = Run("stock-nested", "stock, nested ids")
STOCK_TOP_LEVEL = Run("stock-top-level", "stock, top-level ids (serves its defaults)", 3, DEFAULTS)
RUNS = (*PLUGIN.values(), STOCK_NESTED, STOCK_TOP_LEVEL)
"""Every run, in the order of the table."""
