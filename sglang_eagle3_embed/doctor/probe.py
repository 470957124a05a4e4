"""``probe``: measure a draft offline under each candidate wiring and name the one it was trained for.

The target runs the prompts greedily; every hidden state a candidate wiring needs is captured once;
the draft then runs the greedy chain of :mod:`sglang_eagle3_embed.doctor.chain` under each wiring,
and the scores make a :class:`~sglang_eagle3_embed.doctor.report.ProbeReport`. The parts:

- :mod:`~sglang_eagle3_embed.doctor.request`: the typed request and the checks of its input;
- :mod:`~sglang_eagle3_embed.doctor.backends`: the target (``hf``, ``sglang-cpu``, ``engine``);
- :mod:`~sglang_eagle3_embed.doctor.eagle3_draft`: the draft, read from its folder;
- :mod:`~sglang_eagle3_embed.doctor.wirings`: the candidate wirings;
- :mod:`~sglang_eagle3_embed.doctor.report`: the verdict, as a table or JSON;
- this module: :func:`run_probe` (the scoring core) and :func:`probe_folders` (the command's run).
"""

from __future__ import annotations

import torch

from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.core.readers.model_folder import ModelFolder, headers_read_once
from sglang_eagle3_embed.doctor.chain import score, simulate
from sglang_eagle3_embed.doctor.report import ProbeReport, WiringResult
from sglang_eagle3_embed.doctor.request import (
    ProbeRequest,
    check_capture,
    check_device,
    check_draft_weights,
    check_roles,
    check_rules,
    check_widths,
    load_prompts,
)
from sglang_eagle3_embed.doctor.wirings import Wiring

__all__ = ["probe_folders", "run_probe"]


def _se(values: torch.Tensor) -> float:
    """Standard error of the mean (0 for a single value)."""
    return (values.std() / values.numel() ** 0.5).item() if values.numel() > 1 else 0.0


def _chunks(n: int, size: int):
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def run_probe(
    backend,
    draft,
    token_map,
    wirings: list[Wiring],
    prompts: torch.Tensor,
    *,
    new_tokens: int = 40,
    steps: int = 7,
    batch: int = 64,
    progress: bool | None = None,
) -> ProbeReport:
    """Score every wiring over the target's greedy continuation of ``prompts`` (``[N, P]``). Where
    no wiring can be scored the target does not run: the report is undetermined, its failures say why."""
    from tqdm.auto import tqdm

    prompt_len = prompts.shape[1]
    needed = sorted({i for w in wirings if w.indices is not None for i in w.indices})
    scored = [w for w in wirings if w.indices is not None]
    if not scored:
        return ProbeReport(
            [WiringResult(w, None) for w in wirings], steps, prompts.shape[0], new_tokens, backend.name
        )
    if hasattr(backend, "expect"):  # a backend that starts a server captures what it must from its start
        backend.expect(needed)
    runs = {w.indices: [] for w in scored}
    hits = {w.indices: [] for w in scored}
    bar = tqdm(
        total=prompts.shape[0], desc="probe", unit="prompt", disable=True if progress is False else None
    )
    for part in _chunks(prompts.shape[0], batch):
        # steps more tokens, so that every start within the new_tokens has a whole chain to check
        tokens = backend.generate(prompts[part], new_tokens + steps).to(backend.device)
        states = backend.states(tokens, needed)
        for w in scored:
            aux = torch.cat([states[i] for i in w.indices], dim=-1).to(backend.device)
            seq_runs, seq_hits = simulate(
                draft, backend.embedding, tokens, aux, steps, prompt_len - 1, new_tokens - 1, token_map
            )
            runs[w.indices].extend(seq_runs)
            hits[w.indices].append(seq_hits)
        bar.update(part.stop - part.start)
    bar.close()
    scores = {k: score(torch.cat(runs[k]), torch.cat(hits[k]), steps) for k in runs}
    prompt_ids = tuple(tuple(p) for p in prompts.tolist())
    best = max(scores, key=lambda k: scores[k].accept_length)
    per_sequence = {k: torch.stack([1 + r.double().mean() for r in runs[k]]) for k in runs}
    results = []
    for w in wirings:
        if w.indices is None:
            results.append(WiringResult(w, None))
            continue
        diff = per_sequence[best] - per_sequence[w.indices]  # paired over the same prompts
        gain = per_sequence[w.indices] - 1  # accepted draft tokens per verify step, per prompt
        results.append(
            WiringResult(w, scores[w.indices], diff.mean().item(), _se(diff), gain.mean().item(), _se(gain))
        )
    return ProbeReport(
        results, steps, prompts.shape[0], new_tokens, backend.name, prompt_ids, _dtype(backend)
    )


def _dtype(backend) -> str:
    """The dtype the target runs in: the engine's ``dtype`` argument, else its embedding's."""
    engine_args = getattr(backend, "engine_args", None)
    if engine_args is not None:
        return str(engine_args.get("dtype", "auto"))
    return str(backend.embedding.weight.dtype).removeprefix("torch.")


def probe_folders(request: ProbeRequest) -> ProbeReport:
    """The command's probe: every input checked first (the device against the backend and the
    machine, the folders, their configs and weights' headers, their roles, the target's layers
    against its weights, the draft's weights and its fc against its ids, the prompts, the draft's
    widths against the target), then the backend, the draft and the candidate wirings of
    ``request``. Input a user can get wrong raises :class:`InputError`."""
    from sglang_eagle3_embed.doctor.backends import make_backend
    from sglang_eagle3_embed.doctor.eagle3_draft import load_draft
    from sglang_eagle3_embed.doctor.wirings import candidate_wirings

    check_device(request)
    with headers_read_once():
        target = ModelFolder.read(request.target, "--target")
        target.check_weights()  # a damaged checkpoint is named before anything reads it
        draft_folder = ModelFolder.read(request.draft, "--draft")
        draft_tensors = draft_folder.check_weights()
        check_roles(target, draft_folder)
        check_draft_weights(draft_folder, draft_tensors)
        check_rules(target, draft_folder)  # check's rules: a layer the weights lack would load uninitialised
        check_capture(target, draft_folder)  # before a model loads: no late StopIteration or empty max()
    prompts = load_prompts(request)
    try:
        backend = make_backend(request.backend, target.path, request.device, dict(request.engine_args))
    except InputError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"--target {request.target} cannot be loaded: {type(exc).__name__}: {exc}") from None
    try:
        draft, token_map = load_draft(draft_folder.path, backend.device)
        check_widths(request, backend, draft, token_map)
        vocab = backend.embedding.num_embeddings
        if int(prompts.max()) >= vocab:
            raise InputError(
                f"--prompts: token id {int(prompts.max())} is outside the target's vocabulary of {vocab}"
            )
        wirings = candidate_wirings(draft_folder.config, backend.num_layers, width=draft.captures)
        return run_probe(
            backend,
            draft,
            token_map,
            wirings,
            prompts,
            new_tokens=request.new_tokens,
            steps=request.num_steps,
            progress=request.progress,
        )
    finally:
        getattr(backend, "close", lambda: None)()
