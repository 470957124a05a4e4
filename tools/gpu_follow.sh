#!/bin/bash
# Run one long job on the GPU machine across several device calls, and follow it.
#
#   T=SECONDS bash tools/gpu_follow.sh NAME COMMAND [ARGS...]
#
# A device call may last 10 minutes, and the machine kills what a call leaves running unless it
# started a new process session; /tmp and such a session outlive the call while the machine is
# held. The first call starts COMMAND in its own session (setsid), its output in
# $FOLLOW_DIR/NAME.log (default /tmp/follow); every call then follows the job for up to T seconds
# (default 540) and prints its log. The next call, back to back, picks it up where it is: a job
# spans as many calls as it needs, and no call's limit cuts a step of it in two.
# Exit: 0 while the job runs, the job's own exit code once it has ended (recorded in NAME.rc;
# later calls report it and never start the job again), 2 for a bad invocation. A job that died
# without an exit code (killed) is started again by the next call that names its COMMAND.
set -u
if [ $# -lt 1 ] || [[ ! "$1" =~ ^[A-Za-z0-9_.-]+$ ]]; then
    sed -n 2,14p "$0"
    exit 2
fi
dir=${FOLLOW_DIR:-/tmp/follow}
name=$1
shift
log=$dir/$name.log rc=$dir/$name.rc pid=$dir/$name.pid
mkdir -p "$dir"
ended() {
    tail -c "${FOLLOW_TAIL:-8000}" "$log"
    echo "$name: ended, exit $(cat "$rc")"
    exit "$(cat "$rc")"
}
[ -f "$rc" ] && ended
if [ -f "$pid" ] && kill -0 "$(cat "$pid")" 2>/dev/null; then
    echo "$name: running since $(date -r "$pid" +%T)"
elif [ $# -eq 0 ]; then
    echo "$name: not running here, and no COMMAND to start it" >&2
    exit 2
else
    setsid bash -c '"${@:2}"; echo $? > "$1"' follow "$rc" "$@" > "$log" 2>&1 < /dev/null &
    echo $! > "$pid"
    echo "$name: started"
fi
deadline=$((SECONDS + ${T:-540}))
while [ $SECONDS -lt $deadline ] && [ ! -f "$rc" ]; do
    sleep 1
done
[ -f "$rc" ] && ended
tail -c "${FOLLOW_TAIL:-8000}" "$log"
echo "$name: still running; call again to follow it"
