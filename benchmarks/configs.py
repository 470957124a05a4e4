"""The servers the GPU benchmarks start, in one registry.

``SERVERS``: every ``launch_server`` configuration by id, with its label, its speculative arguments
and the draft it serves. The id is stable: it is what ``--configs`` takes, the key of the results
files (``<results>/<benchmark>.json``; a benchmark that reads another one's result finds a server by
it) and the name of its log files. The label is for people: the row of a table, the line of a plot.

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

from dataclasses import dataclass, field

from harness.engine_run import spec

PLUGIN = "sglang_eagle3_embed"
"""``--model-impl`` of the plugin's servers."""


@dataclass(frozen=True)
class Server:
    """One ``launch_server`` configuration: its id (letters, digits and dashes), its label, its
    speculative arguments (none: plain decoding) and the draft folder it serves, by where the
    draft's ids sit: ``"nested"`` (the plugin serves it), ``"top-level"`` (stock SGLang, which
    ignores them and serves its default layers) or ``"seed"`` (stock SGLang with the seed's
    Kimi-K2.5 draft config, ids ``[2, 30, 58]`` nested, which it reads as capture indices); None
    without a draft."""

    id: str
    label: str
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
    s.id: s
    for s in (
        Server("no-spec", "no speculation"),
        Server("stock-3", "stock SGLang, 3 steps", spec(3), "top-level"),
        Server("plugin-3", "plugin, 3 steps", spec(3), "nested"),
        Server("plugin-7", "plugin, 7 steps", spec(7), "nested"),
        Server("plugin-tree", "plugin, tree", spec(3, topk=4, tokens=8), "nested"),
        # the seed's launch: 1 step, top-k 1, 16 draft tokens (SGLang serves 2), and the 15 it tried
        Server("stock-seed", "stock SGLang, the seed's flags", spec(1, tokens=16), "seed"),
        Server("stock-seed-15", "stock SGLang, the seed's config, 15 steps", spec(15, tokens=16), "seed"),
        Server("plugin-5", "plugin, 5 steps", spec(5), "nested"),
        Server("plugin-2", "plugin, 2 steps", spec(2), "nested"),
        Server("plugin-9", "plugin, 9 steps", spec(9), "nested"),
        # the seed's 1 step and top-k 1 with the draft wired as trained: the fix alone (2 draft
        # tokens, what SGLang serves for the seed's 16)
        Server("plugin-1", "plugin, 1 step", spec(1), "nested"),
    )
}
BASELINE = "no-spec"
"""The server every other one's tokens/s is compared with."""
STEP_TIMED = (BASELINE, "plugin-3")
"""``step_times.py``'s servers: plain decoding, and the plugin's speculative step it times."""
MEASURED_STEP = SERVERS[STEP_TIMED[1]].speculative


def label(server_id: str) -> str:
    """The label of the server ``server_id`` (the id itself for one no longer in :data:`SERVERS`)."""
    return SERVERS[server_id].label if server_id in SERVERS else server_id


def same_step(server_id: str) -> bool:
    """Whether the server ``server_id`` takes the speculative step ``step_times.py`` times."""
    return server_id in SERVERS and SERVERS[server_id].speculative == MEASURED_STEP


@dataclass(frozen=True)
class Suite:
    """The servers one benchmark starts (ids of ``SERVERS``), the arguments they share, and
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

    def kwargs(self, server_id: str, target, drafts) -> dict:
        """``launch_server``'s arguments for the server ``server_id`` of this suite."""
        if server_id not in self.servers:
            raise KeyError(f"{server_id!r} is not one of {list(self.servers)}")
        return {
            **SERVERS[server_id].kwargs(target, drafts),
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
    servers=("no-spec", "stock-3", "plugin-3", "plugin-7", "plugin-tree"),
    shared={**SERVED, "max_total_tokens": 32768},
    gpu_share=0.75,
    side_by_side=True,
)
"""``speedup.py``: every server, side by side on one GPU with the tiny GPU pair, KV pools capped."""

REAL_SPEEDUP = Suite(
    servers=("no-spec", "stock-3", "plugin-3", "plugin-7"),
    shared={**SERVED, "max_total_tokens": 65536},
    gpu_share=0.6,
    side_by_side=False,
)
"""``real_speedup.py``: one at a time with the V2-Lite-shaped pair (31 GB of weights, a KV pool for
64 requests)."""


@dataclass(frozen=True)
class Requests:
    """The serving benchmarks' requests: prompt and output tokens, the most requests one timed run
    sends, and the seed their rows of the pair's language are sampled with (``real_pair.serving_rows``)."""

    prompt_len: int
    output_len: int
    dataset_size: int
    seed: int


REQUESTS = Requests(prompt_len=64, output_len=128, dataset_size=2048, seed=2026)
"""``real_speedup``'s defaults. The Kimi-K2.5-shaped pair trains on sequences of prompt plus output
tokens (``KimiPairSpec.seq_len``), so every position a request reaches is one its target and draft
learnt."""

SERVED_CHECK = (16, 32)
"""``real_speedup.served_check``: the first rows' prompts, and the greedy tokens asked for each
(``kimi_build.draft_quality`` scores the narrow model's own on the same prompts)."""

KIMI_SPEEDUP = Suite(
    servers=(
        "no-spec",
        "stock-seed",
        "stock-seed-15",
        "plugin-1",
        "plugin-2",
        "plugin-3",
        "plugin-5",
        "plugin-7",
        "plugin-9",
    ),
    shared={
        **SERVED,
        "trust_remote_code": True,
        "max_total_tokens": 65536,
        "chunked_prefill_size": 4096,
        "skip_server_warmup": True,
    },
    gpu_share=0.85,
    side_by_side=False,
)
"""``real_speedup.py`` on ``kimi_build.py``'s pair (Kimi-K2.5's real shape, 36 GB of weights): one at
a time; the seed's launch lines against the plugin with the corrected config. SGLang's own start-up
warm-up is skipped: for ``KimiK25ForConditionalGeneration`` it sends an image through the chat
template, which the built tokenizer has no image placeholder for (SGLang refuses it with "Kimi image
placeholders must map one-to-one to image data"); the benchmark warms every batch shape itself."""

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
