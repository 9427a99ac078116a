#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A leader-only cron job: start this on every host (systemd unit, container,
# @reboot). One host leads the election "nightly-report" and runs the job
# every INTERVAL; the others stand by in line. If the leader dies (or
# stalls past its lease) the next host leads within TTL and carries on; a
# leader stopped cleanly (SIGTERM) resigns and hands over at once.
#
#   DLOCK_REDIS=redis://10.0.0.5 examples/leader-cron.sh ./report.sh
#   dlock leader nightly-report            # who runs it now: "FENCE HOST"
#
# The job gets DLOCK_FENCE, which grows from term to term: give it to the
# storage the job writes to, so that a stale leader's late write is refused
# (docs/fencing.md). Exit 143 after SIGTERM (128 + 15), as `dlock run`.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 JOB [ARG]..." >&2; exit 64; }
NAME=${NAME:-nightly-report}
INTERVAL=${INTERVAL:-3600}  # seconds between runs while leading
TTL=${TTL:-30s}             # a dead leader is replaced within this

# While leading, run the job every INTERVAL seconds: the loop is the
# program `dlock elect` supervises, so it stops (SIGTERM) the moment the
# term is lost. --again: after a term (the loop failed, or was stopped
# by a lost term), stand by again.
exec dlock elect --again -t "$TTL" "$NAME" --value "$(hostname)" -- \
    sh -c 'while :; do "$@" || echo "job failed ($?), fence $DLOCK_FENCE" >&2; sleep "$0"; done' \
    "$INTERVAL" "$@"
