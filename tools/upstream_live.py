"""The upstream PR series as patched SGLang on a GPU, without the plugin: ``launch_server`` on the
GPU pair (16-layer DeepSeek-V3 target, EAGLE-3 draft trained on ``[-1, 4, 10]``).

Servers, one at a time, each alone on the GPU, under ``--enable-deterministic-inference``:

    stock-nested   SGLang 0.5.23, ids nested in eagle_config      (expected: fails at startup)
    stock-top      SGLang 0.5.23, ids at the top level             (expected: its default layers)
    pr1-nested     0.5.23 + PR 1, ids nested
    plugin-nested  0.5.23 + the plugin (--model-impl sglang_eagle3_embed), ids nested: the reference
    pr2-top        0.5.23 + PRs 1-2, ids at the top level
    pr1-top        0.5.23 + PR 1 only, ids at the top level        (expected: its default layers)

Every server gets the same prompts in one batched greedy request; the table compares each one's
tokens and per-request accept lengths with the plugin's. Patched trees are link trees of the
installed sglang with the patches applied (``tools.upstream_patch.patched_tree``); the plugin is
installed into a folder of its own that only the plugin server has on its ``PYTHONPATH``, and
every server runs from an empty folder, so that no other server can load it. Run on the GPU
machine with the bundle's sglang first on ``PYTHONPATH`` (docs/benchmarks.md has the command).
Six servers take longer than one device command may run, so split them over two calls:

    python -m tools.upstream_live OUT_DIR --servers stock-nested,stock-top,pr1-nested,plugin-nested
    python -m tools.upstream_live OUT_DIR2 --servers plugin-nested,pr2-top,pr1-top
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness.engine_run import DET, language_prompts, spec
from harness.server_run import Server, run_job
from sglang_eagle3_embed.doctor.pair import GPU_PAIR, build_pair, write_config_variant
from tools import upstream_patch

ROOT = Path(__file__).resolve().parent.parent
PROMPTS, NEW_TOKENS = 32, 40
SERVER = dict(
    dtype="bfloat16", mem_fraction_static=0.5, max_total_tokens=32768, cuda_graph_max_bs_decode=32,
    max_running_requests=32, skip_tokenizer_init=True, **DET, **spec(3),
)  # fmt: skip
JOBS = (  # name, patches applied (None: the plugin on stock SGLang), draft ids placement
    ("stock-nested", 0, "nested"),
    ("stock-top", 0, "top-level"),
    ("pr1-nested", 1, "nested"),
    ("plugin-nested", None, "nested"),
    ("pr2-top", 2, "top-level"),
    ("pr1-top", 1, "top-level"),
)
PLUGIN_LOG = "sglang_eagle3_embed:"


def install_plugin(folder: Path) -> Path:
    """The plugin (with its entry point) installed into ``folder`` alone."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(folder), str(ROOT)],
        check=True,
    )  # fmt: skip
    return folder


def summary(name: str, result: dict, reference: dict | None) -> dict:
    log = result.get("log", "")
    row = {
        "server": name,
        "started": bool(result.get("ok")),
        "plugin_loaded": PLUGIN_LOG in log,
        "error": None,
        "accept_mean": None,
    }
    if not result.get("ok"):
        lines = [x for x in log.splitlines() if "Error" in x or "captured" in x]
        row["error"] = (lines[-1] if lines else result.get("error", ""))[-200:]
        return row
    accepts = result["accept_length"]
    row["accept_mean"] = round(sum(accepts) / len(accepts), 3)
    if reference is not None and reference.get("ok"):
        row["tokens_equal_plugin"] = result["outputs"] == reference["outputs"]
        row["accepts_equal_plugin"] = accepts == reference["accept_length"]
        row["requests_equal"] = sum(
            a == b and x == y
            for a, b, x, y in zip(
                accepts, reference["accept_length"], result["outputs"], reference["outputs"]
            )
        )
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--budget-s", type=float, default=520, help="start no server after this")
    parser.add_argument(
        "--servers",
        type=lambda v: v.split(","),
        default=[name for name, _, _ in JOBS],
        help="comma-separated servers to run, in this order (default: all six; about 100 s each)",
    )
    args = parser.parse_args()
    known = {name: (name, upto, placement) for name, upto, placement in JOBS}
    unknown = [name for name in args.servers if name not in known]
    if unknown:
        parser.error(f"--servers: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    jobs = [known[name] for name in args.servers]
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()

    work = out / "trees"
    trees = {0: None}
    for upto in (1, 2):
        trees[upto] = upstream_patch.patched_tree(work / f"pr{upto}", upto)
    plugin_site = install_plugin(out / "plugin-site")
    pair = build_pair(GPU_PAIR, device="cuda")
    print(f"trees, plugin and pair ready after {time.time() - started:.0f} s", flush=True)
    drafts = {
        placement: write_config_variant(pair.draft, out / f"draft-{placement}", placement=placement)
        for placement in ("nested", "top-level")
    }
    prompts = language_prompts(pair, PROMPTS, 16)
    base_path = os.environ.get("PYTHONPATH", "")
    run_dir = out / "cwd"  # no checkout, no egg-info on the servers' sys.path
    run_dir.mkdir(exist_ok=True)
    os.chdir(run_dir)

    results, rows = {}, []
    for name, upto, placement in jobs:
        if time.time() - started > args.budget_s:
            rows.append({"server": name, "skipped": "time budget"})
            continue
        kwargs = {
            **SERVER,
            "model_path": str(pair.target),
            "speculative_draft_model_path": str(drafts[placement]),
        }
        extra = str(plugin_site) if upto is None else (str(trees[upto]) if upto else "")
        if upto is None:
            kwargs["model_impl"] = "sglang_eagle3_embed"
        env = {"PYTHONPATH": os.pathsep.join(p for p in (extra, base_path) if p)}
        # the bundle's sitecustomize shim goes first again: it must precede the patched tree
        shim = [p for p in base_path.split(os.pathsep) if p.endswith("shim")]
        env["PYTHONPATH"] = os.pathsep.join([*shim, env["PYTHONPATH"]])
        server = Server(name, kwargs, out, env=env)
        job = {"prompts": prompts, "max_new_tokens": NEW_TOKENS, "modes": ["all"]}
        results[name] = run_job(server, job, timeout=300)
        rows.append(summary(name, results[name], results.get("plugin-nested")))
        (out / "summary.json").write_text(json.dumps(rows, indent=2))
        print(json.dumps(rows[-1]), flush=True)

    # rows before the reference existed: compare them now
    reference = results.get("plugin-nested")
    rows = [
        summary(r["server"], results[r["server"]], reference) if r["server"] in results else r for r in rows
    ]
    (out / "summary.json").write_text(json.dumps(rows, indent=2))
    print(f"\n{'server':14} {'start':5} {'plugin':6} {'accept':6} {'tokens=':7} {'accepts=':8} error")
    for r in rows:
        print(
            f"{r['server']:14} {r.get('started', '-')!s:5} {r.get('plugin_loaded', '-')!s:6} "
            f"{r.get('accept_mean')!s:6} {r.get('tokens_equal_plugin', '-')!s:7} "
            f"{r.get('accepts_equal_plugin', '-')!s:8} {r.get('error') or r.get('skipped') or ''}"
        )
    print(f"wall {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
