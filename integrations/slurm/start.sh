#!/usr/bin/env bash
# deviate-cb integration tests: bring up a throw-away single-node Slurm cluster on this machine (Debian,
# root, no systemd), for integrations/slurm (adapted from the team tool shared/tools/slurm-local).
# Idempotent: re-running it leaves already-running daemons alone.
#   WITH_DBD=1 (default) also starts MariaDB + slurmdbd so that `sacct` works
#              (submitit needs sacct to notice jobs that died without writing a result).
#   WITH_DBD=0 minimal cluster: munged + slurmctld + slurmd, sacct disabled.
#   FAKE_GPUS=N (default 0) advertise N fake "gpu" GRES (char devices cloned from /dev/null) so
#              --gres=gpu:1 / --gpus-per-node=1 jobs schedule and get CUDA_VISIBLE_DEVICES.
set -euo pipefail
BASE=${SLURM_LOCAL_DIR:-${TMPDIR:-/tmp}/deviate-slurm}
WITH_DBD=${WITH_DBD:-1}
FAKE_GPUS=${FAKE_GPUS:-0}
CLUSTER=${SLURM_CLUSTER_NAME:-deviate}
DB_PORT=${SLURM_LOCAL_DB_PORT:-3307}
t_start=$(date +%s.%N)
log() { printf '[start.sh %6.2fs] %s\n' "$(awk -v a="$(date +%s.%N)" -v b="$t_start" 'BEGIN{print a-b}')" "$*"; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
wait_for() { # wait_for SECONDS CMD...
  local n=$(( $1 * 10 )); shift
  for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "timed out waiting for: $*" >&2; return 1
}

# ---- 0. packages --------------------------------------------------------------------------
pkgs="munge slurmctld slurmd slurm-client"
[ "$WITH_DBD" = 1 ] && pkgs="$pkgs slurmdbd mariadb-server"
missing=$(for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  log "installing: $missing"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >/dev/null
fi
mkdir -p "$BASE"/{state,spool,log,run}

# ---- 1. munge -------------------------------------------------------------------------------
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
chown munge:munge /etc/munge /etc/munge/munge.key; chmod 700 /etc/munge; chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/lib/munge /var/log/munge      # /run/munge is normally made by systemd-tmpfiles
chown munge:munge /run/munge /var/lib/munge /var/log/munge; chmod 755 /run/munge
if ! alive /run/munge/munged.pid; then
  runuser -u munge -- /usr/sbin/munged          # daemonises, writes /run/munge/munged.pid
  wait_for 10 sh -c 'munge -n | unmunge'
fi
log "munged up (pid $(cat /run/munge/munged.pid))"

# ---- 2. MariaDB + slurmdbd (optional) ----------------------------------------------------
if [ "$WITH_DBD" = 1 ]; then
  DATADIR=$BASE/mysql; SOCK=$BASE/run/mysqld.sock
  if [ ! -d "$DATADIR/mysql" ]; then
    mkdir -p "$DATADIR"; chown mysql:mysql "$DATADIR"
    mariadb-install-db --user=mysql --datadir="$DATADIR" --auth-root-authentication-method=socket \
      --skip-test-db >"$BASE/log/mariadb-install.log" 2>&1
  fi
  chown mysql:mysql "$BASE/run"   # mariadbd (user mysql) writes its socket + pid here
  if ! alive "$BASE/run/mariadbd.pid"; then
    /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$DATADIR" --socket="$SOCK" \
      --pid-file="$BASE/run/mariadbd.pid" --bind-address=127.0.0.1 --port="$DB_PORT" \
      --skip-name-resolve --innodb-buffer-pool-size=64M --log-error="$BASE/log/mariadbd.err" \
      >/dev/null 2>&1 &
    wait_for 60 mariadb --socket="$SOCK" -e 'select 1'
  fi
  mariadb --socket="$SOCK" -e "
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
  log "mariadbd up (pid $(cat "$BASE/run/mariadbd.pid"), 127.0.0.1:$DB_PORT)"

  cat > /etc/slurm/slurmdbd.conf <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
PidFile=$BASE/run/slurmdbd.pid
LogFile=$BASE/log/slurmdbd.log
EOF
  chmod 600 /etc/slurm/slurmdbd.conf        # slurmdbd refuses a group/world-readable file
  if ! alive "$BASE/run/slurmdbd.pid"; then
    /usr/sbin/slurmdbd                        # daemonises
    wait_for 60 bash -c '</dev/tcp/127.0.0.1/6819'
  fi
  log "slurmdbd up (pid $(cat "$BASE/run/slurmdbd.pid"))"
  ACCT="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/linux"
else
  ACCT="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$BASE/log/jobcomp.txt"
fi

# ---- 3. slurm.conf (+ gres.conf) ----------------------------------------------------------
CPUS=$(nproc)
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))  # <= what slurmd detects
GRES_NODE=""; GRES_TYPES=""; : > "$BASE/run/gres.conf.new"
if [ "$FAKE_GPUS" -gt 0 ]; then
  # Slurm 22.05 drops File-less GPUs, so point it at char devices cloned from /dev/null (1:3).
  mkdir -p "$BASE/dev"
  for i in $(seq 0 $((FAKE_GPUS - 1))); do [ -e "$BASE/dev/nvidia$i" ] || mknod "$BASE/dev/nvidia$i" c 1 3; done
  GRES_NODE="Gres=gpu:$FAKE_GPUS"; GRES_TYPES="GresTypes=gpu"
  echo "Name=gpu File=$BASE/dev/nvidia[0-$((FAKE_GPUS - 1))]" > "$BASE/run/gres.conf.new"
fi
cat > "$BASE/run/slurm.conf.new" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MailProg=/bin/true
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/spool
SlurmctldPidFile=$BASE/run/slurmctld.pid
SlurmdPidFile=$BASE/run/slurmd.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd.log
# no cgroups: works in containers/VMs without a delegated cgroup tree
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SchedulerParameters=sched_interval=1
MinJobAge=3600
$ACCT
$GRES_TYPES
NodeName=localhost CPUs=$CPUS RealMemory=$MEM_MB $GRES_NODE State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
changed=0
cmp -s "$BASE/run/slurm.conf.new" /etc/slurm/slurm.conf || changed=1
[ "$(cat "$BASE/run/gres.conf.new")" = "$(cat /etc/slurm/gres.conf 2>/dev/null || true)" ] || changed=1
if [ "$changed" = 1 ]; then   # config changed: restart the slurm daemons (reconfigure can't change GRES)
  for d in slurmd slurmctld; do
    if alive "$BASE/run/$d.pid"; then
      p=$(cat "$BASE/run/$d.pid"); kill "$p"
      for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    fi
  done
  mv "$BASE/run/slurm.conf.new" /etc/slurm/slurm.conf
  if [ -s "$BASE/run/gres.conf.new" ]; then mv "$BASE/run/gres.conf.new" /etc/slurm/gres.conf
  else rm -f /etc/slurm/gres.conf; fi
  log "wrote /etc/slurm/slurm.conf"
fi
rm -f "$BASE/run/slurm.conf.new" "$BASE/run/gres.conf.new"

# ---- 4. slurmctld + slurmd --------------------------------------------------------------
if [ "$WITH_DBD" = 1 ]; then   # register the cluster before slurmctld connects (idempotent)
  sacctmgr -n list cluster format=cluster | grep -qw "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
fi
alive "$BASE/run/slurmctld.pid" || /usr/sbin/slurmctld          # daemonises
alive "$BASE/run/slurmd.pid"    || /usr/sbin/slurmd -N localhost # -N: node name is not $(hostname)
wait_for 30 bash -c 'sinfo -h -o %T | grep -Eq "^(idle|mixed|allocated|drain)"'
if sinfo -h -o %T | grep -q drain; then     # left drained by an earlier bad config
  scontrol update nodename=localhost state=resume
fi
wait_for 30 bash -c 'sinfo -h -o %T | grep -Eq "^(idle|mixed|allocated)"'
if [ "$WITH_DBD" = 1 ]; then wait_for 30 sacct -n -X; fi
log "slurm ready: $(sinfo -h -o '%P %a %D %T %N %C %G')"
