"""The servers the GPU benchmarks start, in one registry.

``SERVERS``: every ``launch_server`` configuration by name, with its speculative arguments and the
draft it serves. The name is the key of the results files (``<results>/<benchmark>.json``) and the
row label of the tables, so a benchmark that reads another one's result finds a server by it.

``Suite``: which of them one benchmark serves, the arguments they share there, and how they share
the GPU. A server's ``mem_fraction_static`` is the suite's share of the GPU's memory divided among
the servers that run side by side: it follows from how many do, and is written nowhere else.

``MEASURED_STEP``: the speculative step ``step_times.py`` times (3 steps, top-k 1, the plugin's);
the servers that take the same step are the ones its derived ratios apply to.

Every ``mem_fraction_static`` a benchmark passes is here: the suites' (``SPEEDUP``, ``REAL_SPEEDUP``,
``KIMI_SPEEDUP``, ``STEP_TIMES``) and ``CAPTURE_WORKERS`` (``capture_overhead.py``'s SGLang ModelRunners, no server).
Measured values are not: they live in the results files the benchmarks write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sglang_eagle3_embed.testing.engine_run import spec

PLUGIN = "sglang_eagle3_embed"
"""``--model-impl`` of the plugin's servers."""


@dataclass(frozen=True)
class Server:
    """One ``launch_server`` configuration: its name, its speculative arguments (none: plain
    decoding) and the draft folder it serves, by where the draft's ids sit: ``"nested"`` (the
    plugin serves it), ``"top-level"`` (stock SGLang, which ignores them and serves its default
    layers) or ``"seed"`` (stock SGLang with the seed's Kimi-K2.5 draft config, ids ``[2, 30, 58]``
    nested, which it reads as capture indices); None without a draft."""

    name: str
    speculative: dict = field(default_factory=dict)
    draft: str | None = None

    @property
    def stock(self) -> bool:
        """Stock SGLang serving a draft (the plugin not selected)."""
        return self.draft is not None and self.draft != "nested"

    def kwargs(self, target, drafts) -> dict:
        """``launch_server``'s arguments of this server alone (``drafts``: folder by placement)."""
        kwargs = {"model_path": str(target), **self.speculative}
        if self.draft is not None:
            kwargs["speculative_draft_model_path"] = str(drafts[self.draft])
        if self.draft == "nested":
            kwargs["model_impl"] = PLUGIN
        return kwargs


SERVERS = {
    s.name: s
    for s in (
        Server("no speculation"),
        Server("stock SGLang, 3 steps", spec(3), "top-level"),
        Server("plugin, 3 steps", spec(3), "nested"),
        Server("plugin, 7 steps", spec(7), "nested"),
        Server("plugin, tree", spec(3, topk=4, tokens=8), "nested"),
        # the seed's launch: 1 step, top-k 1, 16 draft tokens (SGLang serves 2), and the 15 it tried
        Server("stock SGLang, the seed's flags", spec(1, tokens=16), "seed"),
        Server("stock SGLang, the seed's config, 15 steps", spec(15, tokens=16), "seed"),
        Server("plugin, 5 steps", spec(5), "nested"),
    )
}
BASELINE = "no speculation"
"""The server every other one's tokens/s is compared with."""
STEP_TIMED = (BASELINE, "plugin, 3 steps")
"""``step_times.py``'s servers: plain decoding, and the plugin's speculative step it times."""
MEASURED_STEP = SERVERS[STEP_TIMED[1]].speculative


def file_label(name: str) -> str:
    """A server's name as its log files are named: letters, digits, dots and dashes only (a quote
    or a space in a file name keeps tools from copying it back from a GPU machine)."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-")


def same_step(name: str) -> bool:
    """Whether the server ``name`` takes the speculative step ``step_times.py`` times."""
    return name in SERVERS and SERVERS[name].speculative == MEASURED_STEP


@dataclass(frozen=True)
class Suite:
    """The servers one benchmark starts (names of ``SERVERS``), the arguments they share, and
    ``gpu_share``: the fraction of the GPU's memory that the servers running at once hold together
    (SGLang's ``mem_fraction_static`` summed over them); ``side_by_side``: all started at once, or
    one after another (each alone on the GPU)."""

    servers: tuple[str, ...]
    shared: dict
    gpu_share: float
    side_by_side: bool

    def __post_init__(self):
        unknown = [name for name in self.servers if name not in SERVERS]
        if unknown:
            raise ValueError(f"not in SERVERS: {unknown}")

    @property
    def at_once(self) -> int:
        """How many of the servers hold GPU memory at the same time."""
        return len(self.servers) if self.side_by_side else 1

    @property
    def mem_fraction_static(self) -> float:
        """Each server's share: the suite's, divided among the servers running at once."""
        return round(self.gpu_share / self.at_once, 4)

    def kwargs(self, name: str, target, drafts) -> dict:
        """``launch_server``'s arguments for the server ``name`` of this suite."""
        if name not in self.servers:
            raise KeyError(f"{name!r} is not one of {list(self.servers)}")
        return {
            **SERVERS[name].kwargs(target, drafts),
            **self.shared,
            "mem_fraction_static": self.mem_fraction_static,
        }


SERVED = dict(
    dtype="bfloat16", max_running_requests=64, cuda_graph_max_bs_decode=64, cuda_graph_max_bs_prefill=512
)
"""What every served suite shares: bf16, 64 requests in flight at most, decode graphs up to them,
prefill graphs up to 512 tokens (the largest prefill here) rather than SGLang's 8192, which would
add a minute to each start."""

SPEEDUP = Suite(
    servers=("no speculation", "stock SGLang, 3 steps", "plugin, 3 steps", "plugin, 7 steps", "plugin, tree"),
    shared={**SERVED, "max_total_tokens": 32768},
    gpu_share=0.75,
    side_by_side=True,
)
"""``speedup.py``: every server, side by side on one GPU with the tiny GPU pair, KV pools capped."""

REAL_SPEEDUP = Suite(
    servers=("no speculation", "stock SGLang, 3 steps", "plugin, 3 steps", "plugin, 7 steps"),
    shared={**SERVED, "max_total_tokens": 65536},
    gpu_share=0.6,
    side_by_side=False,
)
"""``real_speedup.py``: one at a time with the V2-Lite-shaped pair (31 GB of weights, a KV pool for
64 requests)."""

KIMI_SPEEDUP = Suite(
    servers=(
        "no speculation", "stock SGLang, the seed's flags", "stock SGLang, the seed's config, 15 steps",
        "plugin, 3 steps", "plugin, 5 steps", "plugin, 7 steps",
    ),
    shared={**SERVED, "trust_remote_code": True, "max_total_tokens": 65536, "chunked_prefill_size": 4096},
    gpu_share=0.85,
    side_by_side=False,
)  # fmt: skip
"""``real_speedup.py`` on ``kimi_build.py``'s pair (Kimi-K2.5's real shape, 36 GB of weights): one at
a time; the seed's launch lines against the plugin with the corrected config."""

STEP_TIMES = {
    "kimi-k25": Suite(
        servers=STEP_TIMED,
        shared={"trust_remote_code": True, "max_total_tokens": 131072, "chunked_prefill_size": 4096},
        gpu_share=0.85,
        side_by_side=False,
    ),
    "v2-lite": Suite(
        servers=STEP_TIMED, shared={"max_total_tokens": 131072}, gpu_share=0.6, side_by_side=False
    ),
}
"""``step_times.py``, per real-width target: one server at a time (a target fills most of the GPU),
a KV pool of 128k tokens; Kimi-K2.5's prefill in chunks, the rest of the GPU free for the draft's."""

CAPTURE_WORKERS = 0.85
"""``capture_overhead.py``'s workers' ``mem_fraction_static``: high whatever their number, their KV
pools capped in tokens. They start together, and SGLang sizes a pool from the free memory less
(1 - fraction) x the free memory it saw at its start (``srt/mem_cache/kv_cache_configurator.py:3007-3038``),
which the other workers' weights shrink."""
