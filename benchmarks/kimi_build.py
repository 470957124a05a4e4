"""The seed's deployment at its real shape, built: Kimi-K2.5 (61 layers, hidden 7168, INT4 routed
experts) with an EAGLE-3 draft of the real width trained on the seed's ids ``[-1, 2, 30]``.

    python -m benchmarks.kimi_build OUT [--quick] [--device cuda] [--reuse] [--target-beside]

Four folders are built into ``OUT``, each published whole (``doctor.cache``: a manifest of every
file's SHA-256 written last, then a rename), and each step's seconds are printed and recorded in
``OUT/kimi_build.json``:

1. ``OUT/narrow``: the narrow DeepSeek-V3 (:meth:`KimiPairSpec.narrow_config` over the trained
   layers, ``kimi_pair.place_trained``), trained on the tiny target's synthetic language
   (``doctor.tiny_target.train_target``) with the real vocabulary (the language uses its first
   ``language_vocab`` tokens, as ``benchmarks/real_pair`` does) and its residual norms' epsilon
   scaled (``kimi_pair.narrow_model``).
2. ``OUT/target``: the Kimi-K2.5 folder at the real shape (``KimiK25ForConditionalGeneration``
   around the DeepSeek-V3 text model, a small vision tower: ``doctor.kimi.TINY_VISION``), written
   layer by layer on ``--device`` (:func:`target_shards`): each trained layer widened exactly
   (``kimi_pair.widen_tensor``), every other one random with zero output projections
   (``kimi_pair.inserted_layer``), routed experts quantized to INT4 as Kimi-K2.5 ships them
   (``kimi_pair.checkpoint_tensors``), one shard per layer. Shards land in ``OUT/target.partial``
   as they are written (each complete or absent), so a command stopped mid-build resumes there.
   With ``--target-beside`` a process of its own writes it while the narrow draft trains (step 3),
   and the build ends when the longer of the two does.
3. ``OUT/narrow-draft``: a narrow EAGLE-3 draft (``LlamaForCausalLMEagle3``, the project's
   ``doctor.tiny_draft.train_draft``) on the narrow model's tensors at the seed's trained ids: the
   narrow model plus one zero-output layer holds, state for state, what the wide target holds at
   those ids (``real_pair.compact``).
4. ``OUT/draft``: the narrow draft widened exactly to the real width (:func:`widen_draft`: hidden
   7168, 64 heads of 112, MLP 18432, the real vocabulary), its config with the ids the seed's
   config ships (``[2, 30, 58]``, nested); ``OUT/draft-fixed``: the same weights (linked), ids
   ``[-1, 2, 30]``.

Every step is deterministic from the spec's seed: on the CPU bit for bit; on a GPU the training
runs with deterministic algorithms (``torch.use_deterministic_algorithms``), so the same GPU model
and software rebuild the same bytes, which the printed manifest digests show.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from benchmarks import _common
from benchmarks.kimi_pair import (
    KimiPairSpec,
    checkpoint_tensors,
    inserted_layer,
    pad,
    place_trained,
    scale_hidden_norms,
    template,
    wide_shapes,
    widen_tensor,
)
from benchmarks.real_pair import _timed, capture_map, compact, language_accuracy
from sglang_eagle3_embed.core.atomic import fsync
from sglang_eagle3_embed.core.capture.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.doctor import cache
from sglang_eagle3_embed.doctor.pair import write_config_variant

__all__ = ["build", "narrow_ids", "target_shards", "train_narrow", "train_narrow_draft", "widen_draft"]

RECORD = "kimi_pair.json"
"""In each folder: the spec it was built from and what the step made."""
PARTIAL = ".partial"
"""The suffix of the target's staging folder, where its shards wait until the last is written."""
MADE_FROM = "made_from.json"


# --- training at the narrow width ---------------------------------------------------------------


def _deterministic(device: str):
    if device != "cpu":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        # Strict, not warn_only: with warn_only, PyTorch keeps memory-efficient attention's
        # backward (the draft's training) on its non-deterministic kernel and only warns, so two
        # builds on one GPU trained different drafts. An op without a deterministic CUDA kernel
        # stops the build with PyTorch's error naming it.
        torch.use_deterministic_algorithms(True)


def train_narrow(spec: KimiPairSpec, device: str = "cpu"):
    """The narrow model, trained (eval mode, CPU, float32)."""
    from sglang_eagle3_embed.doctor.tiny_target import train_target

    _deterministic(device)
    layers = len(place_trained(spec.num_layers, spec.ids, spec.config_ids))
    return train_target(
        spec.target_spec(), device, config=spec.narrow_config(layers),
        prepare=lambda model: scale_hidden_norms(model, spec.divisor),
    )  # fmt: skip


def load_narrow(folder: Path, spec: KimiPairSpec):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    scale_hidden_norms(model, spec.divisor)  # the config holds the wide epsilon; the norms need it scaled
    return model


def narrow_ids(spec: KimiPairSpec) -> list[int]:
    """The draft's trained ids in the narrow model plus one zero-output layer (its hidden states are
    the wide target's at the trained layers' outputs)."""
    placed = place_trained(spec.num_layers, spec.ids, spec.config_ids)
    wide = resolve_capture_plan({"eagle_config": {IDS_FIELD: list(spec.ids)}}, spec.num_layers).indices
    return [capture_map(placed, spec.num_layers)[i] - 1 for i in wide]


def draft_overrides(spec: KimiPairSpec) -> dict:
    """The narrow draft's config where ``draft_config_dict`` would differ: every norm of a Llama
    EAGLE-3 draft is over the hidden width, so all take the scaled epsilon."""
    return {
        "rms_norm_eps": spec.draft_eps * spec.divisor,
        "intermediate_size": spec.narrow_draft_intermediate,
    }


def narrow_draft_config(narrow_cfg, spec: KimiPairSpec) -> dict:
    from sglang_eagle3_embed.doctor.tiny_draft import draft_config_dict

    h = narrow_cfg.hidden_size
    config = draft_config_dict(h, narrow_cfg.vocab_size, narrow_cfg.num_attention_heads, narrow_ids(spec), h)
    return {**config, **draft_overrides(spec)}


def train_narrow_draft(narrow, spec: KimiPairSpec, device: str = "cpu"):
    from sglang_eagle3_embed.doctor.tiny_draft import train_draft
    from sglang_eagle3_embed.doctor.tiny_target import Language

    _deterministic(device)
    small = compact(narrow, seed=spec.seed + 5, device=device)
    scale_hidden_norms(small, spec.divisor)
    return train_draft(
        small, Language(spec.target_spec()), narrow_ids(spec), steps=spec.draft_steps,
        ttt_steps=spec.ttt_steps, batch=spec.batch, seq_len=spec.seq_len, lr=spec.draft_lr,
        seed=spec.seed, device=device, config_overrides=draft_overrides(spec),
    ), small  # fmt: skip


def as_written(narrow):
    """A copy of the narrow model with the rounding the wide target's folder applies to it: every
    weight in bf16 (the routing bias, a buffer, stays float32), each routed expert's weights
    quantized to INT4 and back as the folder holds them (groups of ``INT4_GROUP`` inputs, the wide
    tensor's zero columns padding the last group). The function SGLang serves, at the narrow width."""
    written = copy.deepcopy(narrow)
    with torch.no_grad():
        for name, p in written.named_parameters():
            if name.endswith("mlp.experts.gate_up_proj"):  # (experts, 2 x rows, inputs): gate, then up
                half = p.shape[1] // 2
                for e in range(p.shape[0]):
                    p[e, :half] = _int4_round(p[e, :half])
                    p[e, half:] = _int4_round(p[e, half:])
            elif name.endswith("mlp.experts.down_proj"):
                for e in range(p.shape[0]):
                    p[e] = _int4_round(p[e])
            else:
                p.copy_(p.to(torch.bfloat16).float())
    return written


def _int4_round(weight: torch.Tensor) -> torch.Tensor:
    from sglang_eagle3_embed.doctor.quantized import INT4_GROUP, dequantize_int4, quantize_int4

    rows, cols = weight.shape
    padded = torch.zeros(rows, -(-cols // INT4_GROUP) * INT4_GROUP, device=weight.device)
    padded[:, :cols] = weight.to(torch.bfloat16).float()
    q = quantize_int4(padded.cpu())
    return dequantize_int4(q["weight_packed"], q["weight_scale"], q["weight_shape"])[:, :cols].to(weight)


ACCEPT_STEPS = 3
""":func:`draft_quality`'s chain steps (the plugin's server at 3 steps)."""


def draft_quality(narrow, draft, spec: KimiPairSpec, device: str = "cpu") -> dict:
    """What the served pair should do, at the narrow width, on the prompts of the first requests of
    the serving benchmark (``configs.SERVED_CHECK``, ``spec.requests``): served by the narrow model
    exactly (``exact``) and with the folder's rounding (``as written``: what SGLang serves, if it
    computes what the folder holds), the greedy continuation of each prompt as long as a request's
    output. Per model: the draft's accept length and first-step agreement over it (chain speculation
    simulated as ``probe`` does it), and how often its first tokens are the language's likeliest
    (``likeliest``: what ``real_speedup``'s served check measures on a server, on the same prompts).
    A pair whose draft is weak here needs no server to show it; a server whose check scores below
    ``as written`` computes another function than the folder's."""
    from benchmarks.configs import SERVED_CHECK
    from benchmarks.real_pair import language_hits, serving_rows
    from sglang_eagle3_embed.core.capture.ids import Convention, id_to_capture_index
    from sglang_eagle3_embed.doctor.chain import score, simulate
    from sglang_eagle3_embed.doctor.tiny_target import Language

    (count, checked), requests, steps = SERVED_CHECK, spec.requests, ACCEPT_STEPS
    length, new = requests.prompt_len, requests.output_len
    language = Language(spec.target_spec())
    prompts = serving_rows(language, requests)[:count, :length]
    indices = [id_to_capture_index(i, Convention.LAYER_OUTPUT) for i in narrow_ids(spec)]
    draft = draft.to(device)
    out = {}
    for name, model in (("exact", narrow), ("as written", as_written(narrow))):
        small = compact(model, seed=spec.seed + 5, device=device)
        scale_hidden_norms(small, spec.divisor)
        tokens = prompts.to(device)
        with torch.no_grad():
            for _ in range(new + steps):
                tokens = torch.cat([tokens, small(tokens).logits[:, -1:].argmax(-1)], dim=1)
            states = small(tokens, output_hidden_states=True).hidden_states
        aux = torch.cat([states[i] for i in indices], dim=-1)
        runs, hits = simulate(draft, small.get_input_embeddings(), tokens, aux, steps, length - 1, new - 1)
        scored = score(torch.cat(runs), hits, steps)
        first = tokens[:, length : length + min(checked, new)].cpu()
        out[name] = {
            "accept_length": round(scored.accept_length, 3),
            "agreement": round(scored.agreement, 3),
            "likeliest": round(language_hits(language, prompts.tolist(), first.tolist()), 3),
        }
    draft.cpu()
    return out


# --- the draft at the real width ----------------------------------------------------------------


def wide_draft_config(spec: KimiPairSpec, ids) -> dict:
    from sglang_eagle3_embed.doctor.tiny_draft import draft_config_dict

    text = spec.wide_config()
    config = draft_config_dict(
        text.hidden_size, text.vocab_size, text.num_attention_heads, list(ids), text.hidden_size
    )
    # the target's context: SGLang refuses a draft whose derived context is shorter
    # (``srt/configs/model_config.py:1314``)
    return {**config, "rms_norm_eps": spec.draft_eps, "intermediate_size": spec.draft_intermediate,
            "max_position_embeddings": text.max_position_embeddings, "torch_dtype": "bfloat16"}  # fmt: skip


def widen_draft_tensor(name: str, t: torch.Tensor, h: int, shape) -> torch.Tensor:
    """The wide ``shape`` of the narrow draft's tensor ``name`` (hidden ``h``): the stream in the
    first ``h`` dimensions of each hidden-sized block, the narrow heads in the first head slots, the
    narrow MLP rows first; the norms times ``sqrt(h / H)`` (the narrow draft's epsilon is scaled)."""
    all_ = slice(None)
    if name.endswith("norm.weight"):
        return pad(t * math.sqrt(h / shape[0]), shape, [((slice(0, h),), (slice(0, h),))])
    if name == "fc.weight":  # (H, K x H): the K captures side by side
        wide = shape[0]
        blocks = [
            ((slice(0, h), slice(k * h, (k + 1) * h)), (slice(0, h), slice(k * wide, k * wide + h)))
            for k in range(t.shape[1] // h)
        ]
        return pad(t, shape, blocks)
    if name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight")):  # (heads, [embeds; hidden])
        rows, wide = slice(0, t.shape[0]), shape[1] // 2
        return pad(t, shape, [((rows, slice(0, h)), (rows, slice(0, h))),
                               ((rows, slice(h, 2 * h)), (rows, slice(wide, wide + h)))])  # fmt: skip
    if name.endswith(("o_proj.weight", "down_proj.weight")):
        cols = slice(0, t.shape[1])
        return pad(t, shape, [((slice(0, h), cols), (slice(0, h), cols))])
    if name.endswith(("gate_proj.weight", "up_proj.weight")):
        rows = slice(0, t.shape[0])
        return pad(t, shape, [((rows, all_), (rows, slice(0, h)))])
    if name == "lm_head.weight":
        return pad(t, shape, [((all_, all_), (all_, slice(0, h)))])
    raise ValueError(f"{name}: no rule to widen {tuple(t.shape)} to {tuple(shape)}")


def widen_draft(narrow_draft, spec: KimiPairSpec, ids):
    """The draft at the real width computing exactly what ``narrow_draft`` computes on inputs that
    are zero beyond the narrow width (the wide target's states and embeddings), float32."""
    from sglang_eagle3_embed.doctor.eagle3_draft import Eagle3Draft

    config = wide_draft_config(spec, ids)
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in Eagle3Draft(config).state_dict().items()}
    h = narrow_draft.fc.weight.shape[0]
    weights = {
        k: widen_draft_tensor(k, v.float(), h, shapes[k]) for k, v in narrow_draft.checkpoint().items()
    }
    with torch.device(narrow_draft.fc.weight.device):
        wide = Eagle3Draft({**config, "torch_dtype": "float32"})
    wide.load_state_dict(weights)  # strict: a tensor without a rule, or missing, fails here
    return wide.eval(), config


# --- the target at the real width, layer by layer -----------------------------------------------


def _widened(state: dict, narrow_cfg, shapes: dict, first_k_dense: int, prefix: str, to: str) -> dict:
    """``state``'s tensors under ``prefix``, widened, renamed under ``to``."""
    out = {}
    for name, t in state.items():
        if name.startswith(prefix):
            wide_name = to + name[len(prefix) :]
            out[wide_name] = widen_tensor(name, t, narrow_cfg, shapes[template(wide_name, first_k_dense)])
    return out


def target_shards(narrow, spec: KimiPairSpec, device: str = "cpu", dtype=torch.bfloat16):
    """``(file name, tensors)`` of the wide target, one shard per layer after one of the embedding,
    final norm and ``lm_head``, in Kimi-K2.5's checkpoint layout (``language_model.`` prefix, INT4
    routed experts), each built on ``device`` when asked for (a generator: one layer in memory)."""
    wide_cfg = spec.wide_config()
    L, first_k = wide_cfg.num_hidden_layers, wide_cfg.first_k_dense_replace
    placed = place_trained(L, spec.ids, spec.config_ids)
    shapes = wide_shapes(wide_cfg)
    state = {k: v.detach().to(device=device, dtype=torch.float32) for k, v in narrow.state_dict().items()}
    total = L + 1
    name = lambda i: f"model-{i + 1:05d}-of-{total:05d}.safetensors"  # noqa: E731

    def top() -> dict:
        names = ("model.embed_tokens.", "model.norm.", "lm_head.")
        out = {}
        for prefix in names:
            out.update(_widened(state, narrow.config, shapes, first_k, prefix, prefix))
        return checkpoint_tensors({k: v.to(dtype) for k, v in out.items()})

    def layer(i: int) -> dict:
        if i in placed:
            k = placed.index(i)
            tensors = _widened(
                state, narrow.config, shapes, first_k, f"model.layers.{k}.", f"model.layers.{i}."
            )
            tensors = {n: v.to(dtype) for n, v in tensors.items()}
        else:
            tensors = inserted_layer(i, wide_cfg, seed=spec.seed, device=device, dtype=dtype)
        return checkpoint_tensors(tensors)

    yield name(0), top
    for i in range(L):
        yield name(i + 1), (lambda i=i: layer(i))


DIGEST = ".sha256"
"""Beside each shard in the staging folder: the SHA-256 of its bytes, taken when it was written."""


def _save_shard(tensors: dict, path: Path) -> str:
    """Write one shard (a temporary name, flushed, then renamed) and its digest beside it; returns
    the digest. Runs on the writer thread while the device builds the next shard."""
    from safetensors.torch import save_file

    tmp = path.with_suffix(".tmp")
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    fsync(tmp)
    digest = cache.file_digest(tmp)  # read back from the page cache it was just written to
    os.replace(tmp, path)
    path.with_name(path.name + DIGEST).write_text(digest)
    return digest


def _shard_digest(path: Path) -> str:
    """A resumed shard's digest: the one recorded beside it, else read again."""
    try:
        return path.with_name(path.name + DIGEST).read_text().strip()
    except OSError:
        return cache.file_digest(path)


def write_target(
    narrow, spec: KimiPairSpec, narrow_folder: Path, tmp: Path, partial: Path, device: str, log=print
) -> dict[str, str]:
    """The target folder's files into ``tmp``; returns the shards' digests. Shards are written into
    ``partial`` first (where a resumed build finds those written for the same narrow folder and
    spec) and linked into ``tmp``: a build stopped at any point, publishing included, keeps them.
    One writer thread flushes and hashes each shard while the device builds the next."""
    from concurrent.futures import ThreadPoolExecutor

    from safetensors.torch import save_file

    from sglang_eagle3_embed.core.readers.model_folder import DTYPE_BITS, safetensors_header
    from sglang_eagle3_embed.doctor.kimi import kimi_config, vision_weights, write_serving_files
    from sglang_eagle3_embed.doctor.quantized import int4_config
    from sglang_eagle3_embed.doctor.tokenizer import write_tokenizer

    made_from = {"narrow_manifest_sha256": cache.manifest_digest(narrow_folder), "spec": _jsonable(spec)}
    try:
        stale = json.loads((partial / MADE_FROM).read_text()) != made_from
    except (OSError, ValueError):
        stale = True
    if stale:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        (partial / MADE_FROM).write_text(json.dumps(made_from, indent=2))
    started, digests, pending, resumed = time.perf_counter(), {}, {}, 0
    with ThreadPoolExecutor(max_workers=1) as writer:
        for n, (file, make) in enumerate(target_shards(narrow, spec, device)):
            path = partial / file
            if path.exists():
                digests[file] = _shard_digest(path)
                resumed += 1
                continue
            tensors = {k: v.contiguous().cpu() for k, v in make().items()}
            while len(pending) >= 2:  # at most two shards in memory besides the one being built
                first = next(iter(pending))
                digests[first] = pending.pop(first).result()
            pending[file] = writer.submit(_save_shard, tensors, path)
            if n % 10 == 0:
                log(f"  target shard {n + 1}: {time.perf_counter() - started:.0f} s")
        for file, future in pending.items():
            digests[file] = future.result()
    log(f"  target shards: {len(digests) - resumed} written, {resumed} resumed "
        f"({time.perf_counter() - started:.0f} s)")  # fmt: skip
    weight_map, total_bytes = {}, 0
    for file in sorted(digests):
        for key, info in safetensors_header(partial / file).items():
            weight_map[key] = file
            total_bytes += math.prod(info.shape) * DTYPE_BITS[info.dtype] // 8
        os.link(partial / file, tmp / file)
    text = {**spec.text, "n_routed_experts": spec.experts, "num_experts_per_tok": spec.experts,
            "quantization_config": int4_config(), "torch_dtype": "bfloat16"}  # fmt: skip
    config = kimi_config(text)
    vision = {k: v.to(torch.bfloat16) for k, v in vision_weights(config, spec.seed).items()}
    save_file(vision, str(tmp / "vision.safetensors"), metadata={"format": "pt"})
    weight_map.update(dict.fromkeys(vision, "vision.safetensors"))
    index = {"metadata": {"total_size": total_bytes}, "weight_map": weight_map}
    (tmp / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    write_tokenizer(tmp, spec.text["vocab_size"])
    write_serving_files(tmp)
    return digests


# --- the command --------------------------------------------------------------------------------


def _jsonable(spec: KimiPairSpec) -> dict:
    """The spec as its JSON record reads back (tuples as lists)."""
    return json.loads(json.dumps(asdict(spec)))


def _record(folder: Path, spec: KimiPairSpec, **made) -> None:
    (folder / RECORD).write_text(json.dumps({"spec": asdict(spec), **made}, indent=2) + "\n")


def _check_of(folder: Path, spec: KimiPairSpec, source: Path | None = None):
    def check() -> str | None:
        try:
            recorded = json.loads((folder / RECORD).read_text())["spec"]
        except (OSError, ValueError, KeyError) as exc:
            return f"{folder / RECORD}: {exc}"
        if recorded != _jsonable(spec):
            return f"{folder} was built from another spec"
        return cache.origin_problem(folder, MADE_FROM, source) if source else None

    return check


def publish_target(out: Path, spec: KimiPairSpec, narrow, device: str, timings: dict, log=print) -> None:
    """``out/target``, made of the published ``out/narrow`` (``narrow``, loaded): kept where
    complete, else written (resuming the shards a stopped build left) and published."""
    folder, source, partial = out / "target", out / "narrow", out / f"target{PARTIAL}"

    def build_target(tmp: Path) -> dict[str, str]:
        cache.write_origin(tmp, MADE_FROM, source)
        with _timed(timings, "target: write"):
            digests = write_target(narrow, spec, source, tmp, partial, device, log)
        _record(tmp, spec, trained_at=list(place_trained(spec.num_layers, spec.ids, spec.config_ids)))
        return digests

    with _timed(timings, "target: in all"):
        cache.ensure(folder, build_target, _check_of(folder, spec, source))
    shutil.rmtree(partial, ignore_errors=True)  # published: the links are all it needs
    log(f"target: {timings['target: in all']:.0f} s")


def _write_target_beside(out: Path, spec: KimiPairSpec, device: str, timings) -> None:
    """The target writer's process: the target from the published narrow folder; its timings
    go back through ``timings`` (a queue)."""
    _deterministic(device)
    made: dict = {}
    publish_target(
        out, spec, load_narrow(out / "narrow", spec), device, made, lambda line: print(line, flush=True)
    )
    timings.put(made)


class TargetWriter:
    """The target written by a process of its own (spawned: a CUDA context cannot be forked)
    while this one trains the narrow draft: neither waits on the other's GIL or random state."""

    def __init__(self, out: Path, spec: KimiPairSpec, device: str):
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.timings = context.Queue()
        self.process = context.Process(
            target=_write_target_beside, args=(out, spec, device, self.timings), name="target writer"
        )
        self.process.start()

    def wait(self) -> dict:
        """The writer's timings once it has published the target; RuntimeError where it failed."""
        self.process.join()
        if self.process.exitcode != 0:
            raise RuntimeError(
                f"the target writer (a process beside the narrow draft's training) exited with "
                f"{self.process.exitcode}; its error is printed above. The drafts are kept: run the "
                f"build again with --reuse to write the target alone, resuming its shards."
            )
        return self.timings.get(timeout=60)

    def stop(self) -> None:
        """Ends the writer where it runs (its shards so far stay for ``--reuse``)."""
        if self.process.is_alive():
            self.process.terminate()
        self.process.join()


def build_drafts(folders: dict, spec: KimiPairSpec, narrow, device: str, timings: dict, log=print) -> dict:
    """``narrow-draft`` (trained on ``narrow``), ``draft`` (it, widened) and ``draft-fixed`` (the
    corrected config) into ``folders``, each kept where complete; returns the narrow draft's
    quality (:func:`draft_quality`)."""

    def build_narrow_draft(tmp: Path) -> None:
        from safetensors.torch import save_file

        cache.write_origin(tmp, MADE_FROM, folders["narrow"])
        with _timed(timings, "narrow-draft: train"):
            draft, _ = train_narrow_draft(narrow, spec, device)
        save_file(draft.checkpoint(), str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(json.dumps(narrow_draft_config(narrow.config, spec), indent=2))
        _record(tmp, spec, ids=narrow_ids(spec))

    with _timed(timings, "narrow-draft: in all"):
        cache.ensure(folders["narrow-draft"], build_narrow_draft,
                     _check_of(folders["narrow-draft"], spec, folders["narrow"]))  # fmt: skip
    log(f"narrow draft: {timings['narrow-draft: in all']:.0f} s")
    from sglang_eagle3_embed.doctor.eagle3_draft import load_draft

    narrow_draft, _ = load_draft(folders["narrow-draft"])
    quality = draft_quality(narrow, narrow_draft, spec, device)
    log(f"narrow draft, predicted at {ACCEPT_STEPS} steps: {quality}")

    def build_draft(tmp: Path) -> None:
        from safetensors.torch import save_file

        cache.write_origin(tmp, MADE_FROM, folders["narrow-draft"])
        with _timed(timings, "draft: widen"):
            wide, config = widen_draft(narrow_draft.to(device), spec, spec.config_ids)
        weights = {k: v.to(torch.bfloat16).contiguous().cpu() for k, v in wide.checkpoint().items()}
        save_file(weights, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        _record(tmp, spec, ids=list(spec.config_ids), trained_on=list(spec.ids))

    with _timed(timings, "draft: in all"):
        cache.ensure(
            folders["draft"], build_draft, _check_of(folders["draft"], spec, folders["narrow-draft"])
        )
    log(f"draft: {timings['draft: in all']:.0f} s")
    if not folders["draft-fixed"].exists():
        write_config_variant(folders["draft"], folders["draft-fixed"], placement="nested", ids=list(spec.ids))
    return quality


def build(
    out: Path,
    spec: KimiPairSpec,
    device: str = "cpu",
    *,
    reuse: bool = False,
    target_beside: bool = False,
    log=print,
) -> dict:
    """narrow -> target -> narrow-draft -> draft (and draft-fixed) into ``out``; returns the folders,
    each step's seconds, bytes on disk and the manifests' digests. The target comes right after the
    narrow model it is made of, so that a server without a draft can start on it while the narrow
    draft trains (``real_speedup --building``). ``target_beside``: the target is written by a
    process of its own while the narrow draft trains (the same bytes; the build ends when the
    longer of the two does)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _deterministic(device)  # for every step, not only those that train: a resumed build may train none
    folders = {n: out / n for n in ("narrow", "target", "narrow-draft", "draft", "draft-fixed")}
    if not reuse:
        for folder in (*folders.values(), out / f"target{PARTIAL}"):
            shutil.rmtree(folder, ignore_errors=True)
    timings: dict = {}
    made: dict = {}

    def build_narrow(tmp: Path) -> None:
        with _timed(timings, "narrow: train"):
            made["narrow"] = train_narrow(spec, device)
        made["narrow"].save_pretrained(tmp, safe_serialization=True)
        _record(tmp, spec, layers=made["narrow"].config.num_hidden_layers)

    with _timed(timings, "narrow: in all"):
        cache.ensure(folders["narrow"], build_narrow, _check_of(folders["narrow"], spec))
    narrow = made.get("narrow") or load_narrow(folders["narrow"], spec)
    from sglang_eagle3_embed.doctor.tiny_target import Language

    language = Language(spec.target_spec())
    held_out = language.sample(8, spec.seq_len, torch.Generator().manual_seed(spec.seed + 3))
    quality = {"target": language_accuracy(narrow, language, held_out)}
    log(f"narrow target: {narrow.config.num_hidden_layers} layers, hidden {narrow.config.hidden_size}; "
        f"greedy = the language's likeliest at {quality['target']:.0%} ({timings})")  # fmt: skip

    writer = TargetWriter(out, spec, device) if target_beside else None
    if writer is None:
        publish_target(out, spec, narrow, device, timings, log)
    try:
        quality["draft"] = build_drafts(folders, spec, narrow, device, timings, log)
    except BaseException:
        if writer is not None:  # a stopped build leaves no writer behind (--reuse resumes its shards)
            writer.stop()
        raise
    if writer is not None:
        timings.update(writer.wait())
    sizes = {n: sum(f.stat().st_size for f in p.iterdir() if f.is_file()) for n, p in folders.items()}
    digests = {n: cache.manifest_digest(p)[:16] for n, p in folders.items() if (p / cache.MANIFEST).exists()}
    return {"folders": {n: str(p) for n, p in folders.items()}, "timings": timings, "bytes": sizes,
            "manifests": digests, "quality": quality, "device": device}  # fmt: skip


STARTUP = re.compile(
    r"Engine startup timings \(s\): load_weight=([\d.]+), kv_cache_allocation=([\d.]+), "
    r"scheduler_e2e=([\d.]+), cuda_graph=\{([^}]*)\}"
)
"""SGLang 0.5.23's startup line (``srt/entrypoints/engine.py:1117-1126``)."""


def serve_plain(target: Path, logs: Path, new_tokens: int = 128, rounds: int = 3) -> dict:
    """One ``launch_server`` of ``target`` without speculation: seconds to ready, SGLang's own
    startup timings (weights, KV cache, CUDA graphs) and the median decode step at concurrency 1
    (a prompt of 64 tokens; (time for ``new_tokens`` tokens - time for 1) / (``new_tokens`` - 1),
    after a warm-up of the same shape)."""
    import statistics

    from harness.server_run import Server

    args = {
        "model_path": str(target), "trust_remote_code": True, "skip_tokenizer_init": True,
        "dtype": "bfloat16", "context_length": 4096, "max_running_requests": 4, "cuda_graph_max_bs_decode": 4,
    }  # fmt: skip
    prompt = [[(17 * i) % 4000 + 10 for i in range(64)]]
    out: dict = {}
    with Server("kimi-plain", args, logs) as server:
        out["ready_s"] = server.wait_ready(540)
        found = STARTUP.search(server.log)
        if found:
            load, kv, scheduler, graphs = found.groups()
            out["startup"] = {"load_weight_s": float(load), "kv_cache_s": float(kv),
                              "scheduler_s": float(scheduler), "cuda_graph": graphs}  # fmt: skip

        def timed(tokens: int) -> float:
            start = time.perf_counter()
            server.generate(prompt, {"temperature": 0, "max_new_tokens": tokens, "ignore_eos": True}, "all")
            return time.perf_counter() - start

        timed(new_tokens)  # the first passes compile kernels
        samples = [1000 * (timed(new_tokens) - timed(1)) / (new_tokens - 1) for _ in range(rounds)]
        out["decode_step_ms"] = {"median": statistics.median(samples), "samples": samples}
    return out


def main(argv=None) -> int:
    p = _common.parser(__doc__)
    p.add_argument("out", type=Path)
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--reuse", action="store_true", help="keep complete folders of this spec; resume the target"
    )
    p.add_argument(
        "--target-beside", action="store_true",
        help="write the target in a process of its own while the narrow draft trains",
    )  # fmt: skip
    p.add_argument(
        "--serve", type=Path, metavar="LOGS", help="then serve the target without speculation (GPU)"
    )
    args = p.parse_args(argv)
    spec = KimiPairSpec.quick() if args.quick else KimiPairSpec()
    started = time.perf_counter()
    result = build(args.out, spec, args.device, reuse=args.reuse, target_beside=args.target_beside)
    result["build_s"] = round(time.perf_counter() - started, 1)
    (args.out / "kimi_build.json").write_text(json.dumps(result, indent=2))
    print(
        json.dumps({k: result[k] for k in ("build_s", "timings", "bytes", "manifests")}, indent=2), flush=True
    )
    if args.serve:
        result["served"] = serve_plain(Path(result["folders"]["target"]), args.serve)
        (args.out / "kimi_build.json").write_text(json.dumps(result, indent=2))
        print(json.dumps(result["served"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
