"""Turn the GPU acceptance logs into the results table of docs/benchmarks.md (issue #5).

    python benchmarks/acceptance_table.py $EAGLE3_EMBED_GPU_LOGS

Reads the engine results (``<name>.json`` written by ``tests/gpu/engine_run.py``) and the offline
prediction (``offline.json`` written by ``tests/gpu/test_acceptance.py``) and prints a Markdown table:
accept lengths plugin vs stock vs offline, output tokens/s with and without speculation.
"""

import json
import sys
from datetime import date
from pathlib import Path

TRAINED, DEFAULTS = "0,5,11", "2,8,13"
ROWS = [  # (engine result, label, offline steps, offline wiring)
    ("no-spec", "no speculation", None, None),
    ("plugin-steps3-topk1", "plugin, steps 3, top-k 1", "3", TRAINED),
    ("plugin-steps7-topk1", "plugin, steps 7, top-k 1", "7", TRAINED),
    ("plugin-steps3-topk4", "plugin, steps 3, top-k 4, 8 draft tokens", "3", TRAINED),
    ("stock-nested", "stock, nested ids", None, None),
    ("stock-top-level", "stock, top-level ids (serves its defaults)", "3", DEFAULTS),
]


def _mean(values):
    values = [v for v in values or [] if v is not None]
    return sum(values) / len(values) if values else None


def table(logs: Path) -> str:
    offline = json.loads((logs / "offline.json").read_text()) if (logs / "offline.json").exists() else {}
    lines = [
        "| run | accept length (server) | offline prediction | output tokens/s (32 requests) |",
        "|---|---|---|---|",
    ]
    meta = {}
    for name, label, steps, wiring in ROWS:
        path = logs / f"{name}.json"
        if not path.exists():
            lines.append(f"| {label} | not run | | |")
            continue
        result = json.loads(path.read_text())
        meta = meta or {k: result.get(k) for k in ("gpu", "sglang")}
        predicted = offline.get(steps, {}).get(wiring) if steps else None
        pred = f"{predicted:.2f}" if predicted is not None else ""
        if not result.get("ok"):
            lines.append(f"| {label} | fails: {result.get('error', '')[:80]} | {pred} | |")
            continue
        run = result["modes"]["all"]
        accept = _mean(run["accept_length"])
        shown = f"{accept:.2f}" if accept is not None else "-"
        lines.append(f"| {label} | {shown} | {pred} | {run['tokens_per_s']} |")
    head = f"{date.today()}, {meta.get('gpu')}, SGLang {meta.get('sglang')}\n\n"
    return head + "\n".join(lines)


if __name__ == "__main__":
    print(table(Path(sys.argv[1])))
