#!/usr/bin/env bash
# Stop what integrations/slurm/start.sh started, by PID file, in reverse order. `stop.sh --purge` also wipes state.
set -uo pipefail
BASE=${SLURM_LOCAL_DIR:-${TMPDIR:-/tmp}/deviate-slurm}
stop_pid() { # stop_pid NAME PIDFILE
  local f=$2 p
  [ -s "$f" ] || return 0
  p=$(cat "$f")
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p"
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && { echo "$1 ($p) ignored SIGTERM, sending SIGKILL"; kill -KILL "$p"; }
    echo "stopped $1 ($p)"
  fi
  rm -f "$f"
}
# cancel our jobs first: slurmstepd/job processes outlive slurmd otherwise
if [ -s "$BASE/run/slurmctld.pid" ] && kill -0 "$(cat "$BASE/run/slurmctld.pid")" 2>/dev/null; then
  scancel --user="$(id -un)" 2>/dev/null; sleep 1
fi
stop_pid slurmd    "$BASE/run/slurmd.pid"
stop_pid slurmctld "$BASE/run/slurmctld.pid"
stop_pid slurmdbd  "$BASE/run/slurmdbd.pid"
stop_pid mariadbd  "$BASE/run/mariadbd.pid"
stop_pid munged    /run/munge/munged.pid
if [ "${1:-}" = "--purge" ]; then
  rm -rf "$BASE"/{state,spool,log,run,mysql,dev} /etc/slurm/slurm.conf /etc/slurm/slurmdbd.conf /etc/slurm/gres.conf
  echo "purged $BASE state"
fi
