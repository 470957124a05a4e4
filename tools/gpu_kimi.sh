#!/bin/bash
# The seed's deployment at Kimi-K2.5's real shape, built and served on one GPU machine over several
# back-to-back device calls (docs/benchmarks.md, "Does the plugin's fix pay at Kimi-K2.5's real shape?").
#
#   T=SECONDS bash tools/gpu_kimi.sh BUNDLE_DIR ID[:C,...] [ID[:C,...] ...]
#
# ID: a server of benchmarks/configs.py's KIMI_SPEEDUP, served alone; C: its concurrencies (default
# 1,4,16,64). The first call copies the checkout to $RUN/src (default RUN=/tmp/kimi-run), so that the
# next calls' copies of the checkout cannot touch what runs, and starts the job there in its own
# process session (tools/gpu_follow.sh): SGLang's JIT Marlin kernels built beside the pair
# (benchmarks.kimi_build --reuse, which resumes a build a lost call left; --target-beside, the
# target written while the narrow draft trains), and each server in the order given
# (benchmarks.real_speedup --building, ROUNDS timed rounds, default 1): the first, if it serves no
# draft, starts while the build trains; nothing is timed before the build has ended; a server that
# wrote no result is served again after the others. Every call follows the job for up to T seconds
# (default 520), then copies what exists into $OUT: kimi_build.json, kimi-ID.json per server
# (written after every timed run) and logs.tgz. Exit: gpu_follow.sh's.
set -u
run=${RUN:-/tmp/kimi-run}
if [ "${1:-}" = "--job" ]; then # inside the job, under tools/gpu_bundle.sh, in $run/src
    shift
    python3 tools/prebuild_marlin.py > "$run/logs/marlin.log" 2>&1 &
    # The build runs beside the first server, which real_speedup --building starts once the folders
    # it serves are published (without a draft: the target, written before the narrow draft trains)
    # and sends nothing until the build has ended: that server starts in the build's time, not after it.
    built=$run/built
    rm -f "$built" "$run/kimi/kimi_build.json"
    (
        python3 -m benchmarks.kimi_build "$run/kimi" --device cuda --reuse --target-beside
        status=$?
        [ $status = 0 ] && cp "$run/kimi/kimi_build.json" "$run/results/"
        echo $status > "$built.tmp" && mv "$built.tmp" "$built"
    ) &
    ended() { cat "$built" 2>/dev/null; } # the build's exit status; empty while it runs
    serve() { # ITEM: one server alone, at its concurrencies
        local id=${1%%:*} levels=1,4,16,64
        [ "$1" != "$id" ] && levels=${1#*:}
        python3 -m benchmarks.real_speedup --pair "$run/kimi" --configs "$id" --concurrency ${levels//,/ } \
            --rounds "${ROUNDS:-1}" --seconds 12 --name "kimi-$id" --logs "$run/logs/$id" --results "$run/results" \
            --building "$built"
        echo "$id: exit $?"
    }
    failed=()
    for item in "$@"; do
        serve "$item"
        case $(ended) in '' | 0) ;; *) break ;; esac # the build failed: no server can be served
        [ -f "$run/results/kimi-${item%%:*}.json" ] || failed+=("$item")
    done
    # A server that wrote nothing (one that could not start beside the build's training, say) is
    # served once more after the others, on a GPU the build has left.
    [ "$(ended)" = 0 ] && for item in ${failed[@]+"${failed[@]}"}; do serve "$item"; done
    wait
    [ "$(ended)" = 0 ] || exit 1
    exit 0
fi
[ $# -ge 2 ] || { sed -n '2,/^[^#]/{/^#/p}' "$0" && exit 2; } # usage: the comment above
bundle=$(realpath "$1")
shift
mkdir -p "$run/results" "$run/logs"
if [ ! -d "$run/src" ]; then # the job outlives this call's copies of the checkout and the bundle
    mkdir -p "$run/src" "$run/bundle"
    tar -c --exclude=.git --exclude=.sgl --exclude=.venv . | tar -x -C "$run/src"
    cp -r "$bundle/shim" "$run/bundle/"
    ln -s "$bundle"/sglang-*.tar.xz "$run/bundle/"
fi
cd "$run/src"
FOLLOW_DIR=$run T=${T:-520} bash tools/gpu_follow.sh kimi \
    bash tools/gpu_bundle.sh "$run/bundle" bash tools/gpu_kimi.sh --job "$@"
status=$?
if [ -n "${OUT:-}" ]; then
    cp "$run"/results/*.json "$OUT"/ 2>/dev/null
    tar -czf "$OUT/logs.tgz" -C "$run" logs kimi.log 2>/dev/null
    ls -la "$OUT" | tail -n +2
fi
exit $status
