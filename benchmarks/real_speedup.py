"""End to end at a real model's cost: the realistic pair served by ``launch_server``, one server
alone on the GPU at a time, measured by SGLang's own client.

The pair is :mod:`benchmarks.real_pair`'s (DeepSeek-V2-Lite's shape on all 27 layers, its function
trained, a draft on ``[-1, a, b]``) or :mod:`benchmarks.kimi_build`'s (Kimi-K2.5's real shape, the
seed's draft). The servers of ``configs.REAL_SPEEDUP`` (``benchmarks/configs.py``), one after
another: no speculation; stock SGLang with the same draft (ids at the top level, so it serves its
default layers); the plugin at 3 and 7 steps (top-k 1). For the Kimi-K2.5 pair, those of
``configs.KIMI_SPEEDUP``: no speculation; stock SGLang with the seed's draft config (``[2, 30,
58]``) and flags (1 step, 16 draft tokens), and at 15 steps; the plugin with the corrected config at
1, 2, 3, 5, 7 and 9 steps. Each is started, then at every concurrency warmed up by an untimed run
whose throughput sizes the timed runs (``--seconds`` of work per concurrency over all rounds), then
timed for ``--rounds`` rounds, the order of the concurrencies rotating from round to round, by
``python -m sglang.benchmark.serving`` on a ``custom`` dataset of the pair's language. Reported per
server and concurrency: output tokens/s (median, min-max over rounds), median TPOT and TTFT, the
accept length the client reads from the server, the timed seconds, and the median of each round's
ratio to no speculation's same round. Before its warm-up, each server is asked for the greedy
continuations of the first prompts, as token ids and as text (:func:`served_check`): how often its
token is the language's likeliest, the accept length of each request, and whether its outputs are no
speculation's: what the served target computes, apart from what the draft is worth. Beside the
measured ratio, for the servers that take the step it times: the one derived from the step times of
``benchmarks/step_times.py`` (its result, ``--step-times``, by default ``step_times.json`` in
``--results``: V2-Lite's decode and speculative step at batch 1, 8 and 32, 3 steps) times the accept
length measured here; ``-`` without it. Each warm-up's figures go into the result as it ends, and
below the table for a concurrency that has no timed run, marked untimed: the first figures of a
server whose machine is lost before its timed rounds.

    python -m benchmarks.real_speedup --pair /tmp/rp --configs no-spec plugin-3 --logs L --results R
    python -m benchmarks.real_speedup --quick --from-json A.json B.json --results R   # render

``--probe-prompts FILE`` writes prompts of the pair's language for ``probe --prompts`` and stops: the
canary's expectations are recorded on them (``probe --backend engine --expectations``).
With ``--canary ID=FILE`` (expectations ``probe --expectations`` recorded), the server ``ID`` is
also asked by the canary right after the served check, before any warm-up or timed round, as
``sglang-eagle3-embed canary --expect FILE`` asks it: its exit code, served and predicted accept
lengths and verdict go in the result and under the table, and a run stopped in its timed rounds
keeps them.

With ``--building STATUS``, the pair (``kimi_build.py``'s) is still being built and the build's
exit status is written to ``STATUS`` when it ends: a server without a draft starts as soon as the
target is published (the build writes it before the narrow draft trains), one with a draft once the
build has ended, and no server is sent a request before the build has ended with 0, so nothing is
timed beside the build's training. A build that ends otherwise stops the run.

A run writes its JSON after every timed run, so a stopped command keeps what it measured;
``--from-json`` merges several runs' servers into one result.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import time
from itertools import pairwise
from pathlib import Path

from benchmarks import _common, configs, speedup
from harness import engine_run
from harness.server_run import Server, bench_command, client_record, run_client

NAME = "real_speedup"
SUITE = configs.REAL_SPEEDUP
CONFIGS = tuple(dict.fromkeys((*SUITE.servers, *configs.KIMI_SPEEDUP.servers)))
"""The servers of both pairs, by id (``configs.SERVERS``), in the order a merged result shows them."""
KEYS = (*speedup.RESULT_KEYS, "duration")
PER_SERVER = ("rounds", "sizes", "warmup", "startup_s", "canary", "served")
"""A result's entries keyed by server id: what :func:`merged` takes from each run."""
STEP_TIMES = "step_times.json"
"""``step_times.py``'s result, read from ``--results`` unless ``--step-times`` names another."""


def timed_prompts(throughput: float, output_len: int, seconds: float, concurrency: int, cap: int) -> int:
    """Requests that keep the server busy ``seconds`` at ``throughput`` output tokens/s: whole waves
    of ``concurrency``, at least two, at most ``cap`` (the dataset)."""
    waves = max(2, math.ceil(seconds * throughput / output_len / concurrency))
    return min(cap, waves * concurrency)


def rotated(levels, round_: int) -> list:
    k = round_ % len(levels)
    return list(levels[k:]) + list(levels[:k])


def setup(pair: Path, logs: Path):
    """The suite, target, drafts (by placement) and language of a folder ``real_pair.py`` or
    ``kimi_build.py`` built."""
    from benchmarks import kimi_build
    from benchmarks.kimi_pair import KimiPairSpec
    from benchmarks.real_pair import RealPairSpec
    from sglang_eagle3_embed.doctor.pair import write_config_variant

    kimi = pair / "narrow" / kimi_build.RECORD
    if kimi.exists():
        spec = KimiPairSpec(**json.loads(kimi.read_text())["spec"])
        drafts = {"nested": str(pair / "draft-fixed"), "seed": str(pair / "draft")}
        return configs.KIMI_SPEEDUP, pair / "target", drafts, spec
    if not (pair / "real_pair.json").exists():
        raise SystemExit(
            f"--pair {pair}: not a folder benchmarks.real_pair or benchmarks.kimi_build built "
            f"(neither real_pair.json nor narrow/{kimi_build.RECORD} in it)"
        )
    spec = RealPairSpec(**json.loads((pair / "real_pair.json").read_text())["spec"])
    top = write_config_variant(pair / "draft", logs / "top-level-draft", placement="top-level")
    return configs.REAL_SPEEDUP, pair / "target", {"nested": str(pair / "draft"), "top-level": str(top)}, spec


PROBE_PROMPTS = (128, 16)
"""``--probe-prompts``: how many prompts, of how many tokens (probe's default number)."""


def write_probe_prompts(pair: Path, logs: Path, path: Path) -> Path:
    """:data:`PROBE_PROMPTS` prompts of the pair's language, one JSON token list per line, sampled
    with another seed than the serving dataset's."""
    import torch

    from sglang_eagle3_embed.doctor.tiny_target import Language

    *_, spec = setup(pair, logs)
    count, length = PROBE_PROMPTS
    rows = Language(spec.target_spec()).sample(count, length, torch.Generator().manual_seed(2027))
    path.write_text("".join(json.dumps(row) + "\n" for row in rows.tolist()))
    return path


def canary_files(pairs: list[str], servers) -> dict:
    """``--canary ID=FILE ...`` as {server id: (file, its expectations)}, read once, before any
    server starts."""
    from sglang_eagle3_embed.core.canary.expectations import Expectations
    from sglang_eagle3_embed.core.errors import InputError

    out = {}
    for pair in pairs:
        server, sep, file = pair.partition("=")
        if not sep or not file:
            raise SystemExit(f"--canary {pair}: write it as ID=FILE (FILE from probe --expectations)")
        if server not in servers:
            raise SystemExit(f"--canary {pair}: {server!r} is not a server of this run {list(servers)}")
        if configs.SERVERS[server].draft is None:
            raise SystemExit(f"--canary {pair}: {server!r} does not speculate; the canary judges a draft")
        try:
            out[server] = (Path(file), Expectations.read(file, "--canary"))
        except InputError as error:
            raise SystemExit(str(error)) from None
    return out


def ask_canary(url: str, expect: Path, expectations) -> dict:
    """The canary's answer for the server at ``url`` against ``expectations`` (read from
    ``expect``): its exit code and its JSON report, or exit 2 and the one line the canary says when
    it gets no answer it can judge (the measurement stands)."""
    from sglang_eagle3_embed.core.errors import InputError
    from sglang_eagle3_embed.doctor.canary import run_canary

    try:
        answer = run_canary(url, expectations)
    except InputError as error:
        return {"exit": 2, "expect": str(expect), "error": str(error)}
    return {"exit": answer.exit_code, "expect": str(expect), **answer.as_dict(expectations)}


def served_check(server, language, rows, prompt_len: int) -> dict:
    """What the server generates greedily for the first prompts of the dataset, before anything is
    timed, asked as token ids and as the text the serving client sends: per form, how often its
    token is the language's likeliest (what the served target computes; the build records its
    narrow model's own score), each request's accept length and prompt tokens as the server counts
    them, a digest of the outputs (lossless speculation gives no speculation's; the text gives the
    ids' if the server tokenizes it back) and the outputs themselves, which say where two servers
    part."""
    from benchmarks.real_pair import language_hits
    from sglang_eagle3_embed.doctor.tokenizer import text_of

    count, new = configs.SERVED_CHECK
    new = min(new, rows.shape[1] - prompt_len)  # no further than a request's output goes
    prompts = rows[:count, :prompt_len].tolist()
    sampling = {"temperature": 0, "max_new_tokens": new, "ignore_eos": True}
    out = {}
    for form, payload in (("ids", {"input_ids": prompts}), ("text", {"text": [text_of(p) for p in prompts]})):
        try:
            status, body = server.request("/generate", {**payload, "sampling_params": sampling})
        except OSError as error:  # the measurement that follows is worth more than this check
            status, body = None, error
        if status != 200:
            out[form] = {"error": f"/generate answered {status}: {str(body)[:300]}"}
            continue
        outputs = [o["output_ids"] for o in body]
        out[form] = {
            "language_accuracy": round(language_hits(language, prompts, outputs), 3),
            "accept_lengths": [o["meta_info"].get("spec_accept_length") for o in body],
            "prompt_tokens": [o["meta_info"].get("prompt_tokens") for o in body],
            "outputs": hashlib.sha256(json.dumps(outputs).encode()).hexdigest()[:16],
            "output_ids": outputs,
        }
    return out


def folder_prediction(pair: Path, spec, requests) -> dict | None:
    """The build's ``quality.draft`` (``kimi_build.draft_quality``, in ``kimi_build.json``) when it
    scored the prompts this run's served check asks (the pair trained for these requests)."""
    try:
        quality = json.loads((pair / "kimi_build.json").read_text())["quality"]["draft"]
    except (OSError, ValueError, KeyError):
        return None
    return quality if getattr(spec, "requests", None) == requests else None


def untrained_note(requests, seq_len: int) -> str | None:
    """A line when ``requests`` reach past the ``seq_len`` tokens the pair trained on: the tokens
    served there come from a function nobody trained, for the target and the draft alike."""
    reach = requests.prompt_len + requests.output_len
    if reach <= seq_len:
        return None
    return f"note: a request reaches position {reach}; the pair trained on {seq_len} tokens, past which its function is untrained"


BUILD_POLL_S = 2.0
"""How often ``--building`` looks at the pair's folders and the build's status file."""


def wait_for_build(status: Path | None, folder: Path | None = None) -> None:
    """With ``--building STATUS``: return once ``folder`` is published (its manifest written last,
    ``doctor.cache``) or, without a folder, once the build has ended with exit 0; stop the run when
    the build ended without it. Without ``STATUS`` (the pair built before): return at once."""
    from sglang_eagle3_embed.doctor.cache import MANIFEST

    if status is None:
        return

    def published() -> bool:
        return folder is not None and (folder / MANIFEST).exists()

    while not published():
        ended = status.read_text().strip() if status.exists() else ""
        if ended == "0" and folder is None:
            return
        if ended and not published():  # a folder published just before the build ended counts
            missing = f", before {folder} was published" if folder is not None else ""
            raise SystemExit(
                f"--building {status}: the pair's build ended with exit {ended}{missing}; see its log"
            )
        time.sleep(BUILD_POLL_S)


def measure(args) -> dict:
    from benchmarks.real_pair import serving_rows
    from harness.server_run import write_custom_dataset
    from sglang_eagle3_embed.doctor.tiny_target import Language

    pair, logs, building = args.pair, args.logs, getattr(args, "building", None)
    logs.mkdir(parents=True, exist_ok=True)
    wait_for_build(building, pair / "narrow")  # kimi_build's first folder: what setup() reads
    suite, target, drafts, spec = setup(pair, logs)
    args.configs = args.configs or list(suite.servers)
    unknown = [name for name in args.configs if name not in suite.servers]
    if unknown:
        raise SystemExit(f"--configs {unknown}: not among this pair's servers {list(suite.servers)}")
    canaries = canary_files(args.canary or [], args.configs)
    cap = args.dataset_size
    language = Language(spec.target_spec())
    requests = configs.Requests(args.prompt_len, args.output_len, cap, configs.REQUESTS.seed)
    rows = serving_rows(language, requests)
    if note := untrained_note(requests, spec.seq_len):
        print(note, flush=True)
    dataset = write_custom_dataset(rows.tolist(), args.prompt_len, logs / "language.jsonl")
    result = {key: {} for key in PER_SERVER} | {
        "kimi": suite is configs.KIMI_SPEEDUP,
        "expected": folder_prediction(pair, spec, requests),
        "setup": vars(args) | {"spec": spec.__dict__},
    }
    for name in args.configs:
        server = Server(name, suite.kwargs(name, target, drafts), logs)
        result["rounds"][name] = {str(c): [] for c in args.concurrency}
        wait_for_build(building, None if configs.SERVERS[name].draft else target)
        try:
            server.start()
            result["startup_s"][name] = server.wait_ready(600)
            print(f"{configs.label(name)}: ready in {result['startup_s'][name]} s", flush=True)
            if building is not None:
                held = time.perf_counter()
                wait_for_build(building)  # nothing is sent while the build trains on the same GPU
                result["expected"] = folder_prediction(pair, spec, requests)
                print(
                    f"{configs.label(name)}: the build ended {time.perf_counter() - held:.0f} s later",
                    flush=True,
                )
            result["served"][name] = served_check(server, language, rows, args.prompt_len)
            _common.write_json(args.results, args.name, result)
            print(served_line(name, result["served"], result["expected"]), flush=True)
            if name in canaries:  # before the timed rounds: a run stopped in them keeps the verdict
                result["canary"][name] = ask_canary(server.url, *canaries[name])
                _common.write_json(args.results, args.name, result)
                print(canary_line(name, result["canary"][name]), flush=True)
            sizes = {}
            for c in args.concurrency:  # warm-up: every batch shape compiled before anything is timed
                out = logs / f"warmup-{c}-{name}.jsonl"
                run_client(
                    _bench(server, dataset, pair, c, max(2 * c, 4), args, out, 0), out.with_suffix(".log")
                )
                warm = result["warmup"].setdefault(name, {})[str(c)] = client_record(out, KEYS)
                _common.write_json(args.results, args.name, result)  # untimed, but a lost run keeps it
                print(warmup_line(name, c, warm), flush=True)
                rate = warm["output_throughput"]
                sizes[str(c)] = timed_prompts(rate, args.output_len, args.seconds / args.rounds, c, cap)
            result["sizes"][name] = sizes
            for r in range(args.rounds):
                for c in rotated(args.concurrency, r):
                    out = logs / f"bench-{r}-{c}-{name}.jsonl"
                    run_client(
                        _bench(server, dataset, pair, c, sizes[str(c)], args, out, r + 1),
                        out.with_suffix(".log"),
                    )
                    result["rounds"][name][str(c)].append(client_record(out, KEYS))
                    _common.write_json(args.results, args.name, result)
                print(f"{configs.label(name)}: round {r + 1} of {args.rounds} measured", flush=True)
        finally:
            server.stop()
    return result


def server_kwargs(server_id: str, target, drafts: dict) -> dict:
    """``launch_server``'s arguments for the server ``server_id`` of :data:`SUITE`."""
    return SUITE.kwargs(server_id, target, drafts)


def _bench(server, dataset, pair, concurrency, prompts, args, out, seed):
    return bench_command(
        server.port, dataset, str(pair / "target"), concurrency, prompts, args.output_len, out, seed
    )


def warmup_line(name: str, concurrency: int, record: dict) -> str:
    """A warm-up run's figures, marked untimed: the first figures of a server whose timed rounds a
    lost machine never reaches."""
    fmt = _common.fmt
    return (
        f"{configs.label(name)}: warm-up at concurrency {concurrency} (untimed, {record.get('completed')} "
        f"requests): {fmt(record.get('output_throughput'), 0)} tok/s, TPOT {fmt(record.get('median_tpot_ms'))} "
        f"ms, accept length {fmt(record.get('accept_length'))}"
    )


def merged(results: list[dict]) -> dict:
    """Several runs' servers as one result (a later run's server replaces an earlier one's)."""
    out = {key: {} for key in PER_SERVER} | {"env": {}, "kimi": False}
    for result in results:
        for key in PER_SERVER:
            out[key].update(result.get(key, {}))
        out["env"] = result.get("env") or out["env"]
        out["kimi"] = out["kimi"] or bool(result.get("kimi"))
        out["expected"] = result.get("expected") or out.get("expected")
    order = [name for name in CONFIGS if name in out["rounds"]]
    out["rounds"] = {name: out["rounds"][name] for name in order}
    return out


def step_ratio(steps: dict, concurrency: int) -> float | None:
    """V2-Lite's decode step / speculative step at a batch of ``concurrency`` (log-linear between
    the measured batches 1, 8 and 32; None outside them)."""
    plain, plugin = steps["plain"]["steps"], steps["plugin"]["steps"]
    batches = sorted(int(b) for b in plain if b in plugin)
    ratio = {b: plain[str(b)]["ms"] / plugin[str(b)]["ms"] for b in batches}
    if concurrency in ratio:
        return ratio[concurrency]
    for lo, hi in pairwise(batches):
        if lo < concurrency < hi:
            w = (math.log2(concurrency) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
            return ratio[lo] + w * (ratio[hi] - ratio[lo])
    return None


def derived(summary: dict, steps: dict | None) -> dict:
    """Per server that takes the speculative step ``step_times.py`` times (``configs.same_step``)
    and concurrency: the step-time formula's ratio (accept length x decode step / speculative step)
    at the accept length measured here."""
    out = {}
    for name, by_c in summary.items():
        if not configs.same_step(name) or steps is None:
            continue
        for c, s in by_c.items():
            ratio = step_ratio(steps, int(c))
            if ratio is not None and s["accept_length"]:
                out[(name, c)] = s["accept_length"] * ratio
    return out


def summarize(result: dict) -> dict:
    summary = speedup.summarize(result["rounds"])
    for name, by_c in summary.items():
        for c, s in by_c.items():
            runs = result["rounds"][name][c]
            s["ttft_ms"] = statistics.median(r["median_ttft_ms"] for r in runs)
            s["timed_s"] = sum(r.get("duration") or 0 for r in runs)
            s["requests"] = result.get("sizes", {}).get(name, {}).get(c)
    return summary


def step_times(path: Path) -> dict | None:
    """V2-Lite's step times from ``step_times.py``'s result at ``path``; None without one."""
    if not path.exists():
        return None
    return json.loads(path.read_text())["models"].get("v2-lite")


def render(result: dict, steps: dict | None = None) -> str:
    summary = summarize(result)
    formula = derived(summary, steps)
    header = ["server", "concurrency", "output tokens/s (min-max)", "TPOT ms", "TTFT ms", "accept length",
              "timed s (requests/round)", "vs no speculation", "derived"]  # fmt: skip
    rows = []
    for name, by_c in summary.items():
        for c, s in by_c.items():
            d = formula.get((name, c))
            rows.append([
                configs.label(name), c, f"{s['tokens_per_s']:.0f} ({s['spread'][0]:.0f}-{s['spread'][1]:.0f})",
                f"{s['tpot_ms']:.2f}", f"{s['ttft_ms']:.0f}", _common.fmt(s["accept_length"]),
                f"{s['timed_s']:.0f} ({s['requests']})", _common.ratio(s["vs_no_speculation"]),
                _common.ratio(d),
            ])  # fmt: skip
    table = _common.markdown_table(header, rows)
    served = result.get("served", {})
    checks = "\n".join(served_line(name, served, result.get("expected")) for name in served)
    canaries = [canary_line(name, answer) for name, answer in result.get("canary", {}).items()]
    untimed = "\n".join(
        warmup_line(name, int(c), record)
        for name, by_c in result.get("warmup", {}).items()
        for c, record in by_c.items()
        if not result["rounds"].get(name, {}).get(c)  # a lost run's only figures at c
    )
    return "\n\n".join([table, *([checks] if checks else []), *canaries, *([untimed] if untimed else [])])


def served_line(name: str, served: dict, expected: dict | None = None) -> str:
    """The served check of server ``name`` (:func:`served_check`), each form's outputs beside no
    speculation's when the result has them, and its likeliest tokens beside the folder's own
    (``expected``: :func:`folder_prediction`) when the build scored the same prompts."""
    parts, plain = [], served.get("no-spec", {})
    for form, check in served[name].items():
        if "error" in check:
            parts.append(f"{form}: {check['error']}")
            continue
        part = f"{form}: likeliest {check['language_accuracy']:.1%}"
        if expected:
            part += f" (the folder's {expected['as written']['likeliest']:.1%})"
        part += f", outputs {check['outputs']}"
        if "outputs" in plain.get(form, {}) and name != "no-spec":
            same = plain[form]["outputs"] == check["outputs"]
            part += " (no speculation's)" if same else f" (not no speculation's{parted(plain[form], check)})"
        counted = [n for n in check.get("prompt_tokens", []) if n is not None]
        if counted:  # the server's count: a text the server tokenizes into other ids shows here
            part += f", prompt tokens {min(counted)}-{max(counted)}"
        accepts = [a for a in check["accept_lengths"] if a is not None]
        if accepts:
            part += f", accept length per request {min(accepts):.2f}-{max(accepts):.2f}"
        parts.append(part)
    return f"served check, {configs.label(name)}: " + "; ".join(parts)


def parted(plain: dict, check: dict) -> str:
    """Where ``check``'s outputs leave ``plain``'s: how many requests differ and the first differing
    token (:func:`harness.engine_run.differences`); empty unless both served checks kept their
    outputs (older results keep only digests) and some request differs."""
    ours, theirs = check.get("output_ids"), plain.get("output_ids")
    if not ours or not theirs or len(ours) != len(theirs):
        return ""
    moved = engine_run.differences(ours, theirs)
    if not moved:
        return ""
    request, position, _, _ = moved[0]
    return f": {len(moved)} of {len(theirs)} requests differ, the first in request {request} at output token {position}"


def canary_line(name: str, answer: dict) -> str:
    """One line per server the canary asked: its exit code and what the canary said, in its words
    (its verdict, the settings it would not compare, or why it got no answer)."""
    if answer.get("error"):
        said = [answer["error"]]
    elif answer.get("refused"):
        said = [f"served {_common.fmt(answer['served_accept_length'])}"]
        said += [f"not compared: {r}" for r in answer["refused"]]
    else:
        said = answer.get("verdict") or [f"served {_common.fmt(answer['served_accept_length'])}"]
    return f"canary, {configs.label(name)}: exit {answer['exit']}, {' '.join(said)}"


def plot(result: dict, results_dir: Path) -> Path:
    env = result.get("env", {})
    pair = "Kimi-K2.5's real shape (61 layers)" if result.get("kimi") else "V2-Lite-shaped pair (27 layers)"
    title = f"SGLang's serving client, {pair}: {env.get('gpu', 'GPU')}, {env.get('date', '')}"
    return speedup.plot(result, results_dir, name=NAME, title=title)


def main() -> dict:
    p = _common.parser(__doc__)
    p.add_argument("--logs", type=Path, default=Path("/tmp/real_speedup"), help="server logs, dataset")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds")
    p.add_argument("--from-json", type=Path, nargs="+", help="render (merged) saved results (no GPU)")
    p.add_argument("--pair", type=Path, help="the folder benchmarks.real_pair or benchmarks.kimi_build built")
    p.add_argument(
        "--configs",
        nargs="+",
        choices=list(CONFIGS),
        metavar="ID",
        help="servers by id (default: every server of the pair's suite): "
        + "; ".join(f"{i}: {configs.label(i)}" for i in CONFIGS),
    )
    p.add_argument("--concurrency", type=int, nargs="+", default=list(speedup.CONCURRENCY))
    p.add_argument("--seconds", type=float, default=24.0, help="timed seconds per concurrency, all rounds")
    p.add_argument("--prompt-len", type=int, default=configs.REQUESTS.prompt_len)
    p.add_argument("--output-len", type=int, default=configs.REQUESTS.output_len)
    p.add_argument(
        "--dataset-size",
        type=int,
        default=configs.REQUESTS.dataset_size,
        help="most requests one timed run sends",
    )
    p.add_argument("--name", default=NAME, help="the result's file name (one per command)")
    p.add_argument(
        "--probe-prompts", type=Path, metavar="FILE", help="write prompts for probe --prompts; stop"
    )
    p.add_argument(
        "--canary",
        nargs="+",
        metavar="ID=FILE",
        help="before its timed rounds, ask server ID the canary with expectations FILE (probe --expectations)",
    )
    p.add_argument(
        "--step-times", type=Path, help=f"step_times.py's result (default: {STEP_TIMES} in --results)"
    )
    p.add_argument(
        "--building",
        type=Path,
        metavar="STATUS",
        help="kimi_build.py still builds --pair and writes its exit status to STATUS when it ends: "
        "start each server once its folders are published, send requests once the build has ended",
    )
    args = p.parse_args()

    def table(result: dict) -> str:  # the step times are V2-Lite's: no derived column for Kimi-K2.5
        steps = None if result.get("kimi") else step_times(args.step_times or args.results / STEP_TIMES)
        return render(result, steps)

    if args.from_json:
        result = merged([json.loads(f.read_text()) for f in args.from_json])
        return _common.publish(args, NAME, result, plot, table, measured_on=None)
    if args.pair is None:
        p.error("--pair is required to measure")
    if args.probe_prompts:
        args.logs.mkdir(parents=True, exist_ok=True)
        print(f"wrote {write_probe_prompts(args.pair, args.logs, args.probe_prompts)}")
        return {}
    _common.require_cuda("real_speedup.py")
    result = measure(args)
    return _common.publish(args, args.name, result, plot, table, measured_on="cuda")


if __name__ == "__main__":
    main()
