#!/bin/bash
# Run GPU test or benchmark commands side by side, each on its own GPUs, within one time limit.
#
#   bash tools/gpu_streams.sh LIMIT_S "GPUS|COMMAND" ["GPUS|COMMAND" ...]
#
# e.g. on a 2-GPU machine, half of the single-GPU suite on each GPU:
#   bash tools/gpu_streams.sh 480 '0|python -m pytest -m gpu tests/gpu/test_acceptance.py -k "accept_length"' \
#                                 '1|python -m pytest -m gpu tests/gpu/test_engine_smoke.py'
# Stream i runs with CUDA_VISIBLE_DEVICES=GPUS and EAGLE3_EMBED_GPU_LOGS=$STREAM_LOGS/s<i> (default
# STREAM_LOGS=/tmp/logs), its output in s<i>/out.txt; a stream still running at LIMIT_S seconds is
# stopped, and every engine it started (tests/gpu/engine_run.py, with its whole session) is killed, so the
# GPUs are free for the next command. Prints each stream's exit status and its test summary lines.
set -u
if [ $# -lt 2 ]; then
    sed -n 2,12p "$0"
    exit 2
fi
T0=$(date +%s)
LIMIT=$1
shift
LOGS=${STREAM_LOGS:-/tmp/logs}
i=0
for s in "$@"; do
    gpus=${s%%|*}
    cmd=${s#*|}
    d=$LOGS/s$i
    mkdir -p "$d"
    (
        left=$((LIMIT - ($(date +%s) - T0)))
        CUDA_VISIBLE_DEVICES=$gpus EAGLE3_EMBED_GPU_LOGS=$d timeout --kill-after=10 "$left" bash -c "$cmd" >"$d/out.txt" 2>&1
        echo "stream $i [GPUs $gpus] exit $? after $(($(date +%s) - T0)) s: $cmd"
    ) &
    i=$((i + 1))
done
wait
# engines of a stopped stream run in their own sessions (tests/gpu/conftest.py): kill each session
# whole, SGLang's renamed workers with it (sglang::detokenizer holds no GPU, but a DP-attention
# engine's TCP port), then whatever still holds a GPU
for sid in $(pgrep -f "[t]ests/gpu/engine_run.py"); do
    pkill -9 -s "$sid" 2>/dev/null
done
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -9 2>/dev/null
fi
for f in "$LOGS"/s*/out.txt; do
    echo "== $f"
    grep -E "PASSED|FAILED|ERROR|SKIPPED|[0-9]+ (passed|failed)|measured|accept length|differ|finished" "$f" | tail -30
done
