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
# stopped, and every process it started is killed (engines and their workers included), so the GPUs
# are free for the next command. Processes this script did not start are left alone.
set -u
if [ $# -lt 2 ]; then
    sed -n 2,12p "$0"
    exit 2
fi
T0=$(date +%s)
LIMIT=$1
shift
LOGS=${STREAM_LOGS:-/tmp/logs}
# every process a stream starts inherits this tag in its environment, also an engine that starts its
# own session (the GPU tests' engines do) and the workers SGLang spawns and renames
TAG="gpu-streams-$$-$T0-$RANDOM"
i=0
for s in "$@"; do
    gpus=${s%%|*}
    cmd=${s#*|}
    d=$LOGS/s$i
    mkdir -p "$d"
    (
        left=$((LIMIT - ($(date +%s) - T0)))
        EAGLE3_EMBED_STREAM=$TAG CUDA_VISIBLE_DEVICES=$gpus EAGLE3_EMBED_GPU_LOGS=$d \
            timeout --kill-after=10 "$left" bash -c "$cmd" >"$d/out.txt" 2>&1
        echo "stream $i [GPUs $gpus] exit $? after $(($(date +%s) - T0)) s: $cmd"
    ) &
    i=$((i + 1))
done
wait
# what the streams started and left running: the processes whose environment carries the tag
for environ in /proc/[0-9]*/environ; do
    if tr '\0' '\n' <"$environ" 2>/dev/null | grep -qx "EAGLE3_EMBED_STREAM=$TAG"; then
        pid=${environ#/proc/}
        kill -9 "${pid%/environ}" 2>/dev/null
    fi
done
for f in "$LOGS"/s*/out.txt; do
    echo "== $f"
    grep -E "PASSED|FAILED|ERROR|SKIPPED|[0-9]+ (passed|failed)|measured|accept length|differ|finished" "$f" | tail -30
done
