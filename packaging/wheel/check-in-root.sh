#!/usr/bin/env bash
# Installs a ddprun wheel into a venv inside a Debian root made by make-root.sh and checks that
# it works there as a user would meet it (issue 38, "other distributions"):
#   packaging/wheel/check-in-root.sh ROOT WHEEL [bullseye-full|arm64-allreduce]
# The mode defaults to the wheel's platform tag: bullseye-full for x86_64, arm64-allreduce for
# aarch64.
#
# Contract:
# - Needs root. Runs in a private mount namespace (unshare --mount --propagation private) in
#   which it mounts proc on ROOT/proc, /dev (recursively, so /dev/shm and /dev/pts) on
#   ROOT/dev, /sys on ROOT/sys (hwloc reads the topology there for --numa-binding) and this
#   machine's /etc/hosts on ROOT/etc/hosts (debootstrap writes none); a trap unmounts them
#   whatever happens, and the namespace drops them if even that is skipped, so nothing stays
#   mounted in ROOT and no mount reaches the host's namespace.
# - Copies WHEEL to ROOT/tmp, makes a fresh venv, `python3 -m venv /opt/ddprun-venv` (the root's
#   Python), and `pip install --no-index /tmp/WHEEL` into it: no network is used (the wheel
#   has no dependencies).
# - Programs run as `chroot ROOT env -i PATH=/opt/ddprun-venv/bin:/usr/bin:/bin HOME=/root ...`
#   (arm64 ones under qemu-user-static through binfmt_misc; see root-lib.sh).
# - Each check runs under `timeout` and prints one line, `PASS name (N s)` or `FAIL name
#   (why, N s)` followed by the end of its output; the script goes on with the next check and
#   exits 1 when any failed, 0 when all passed (2: usage, not root, a root or wheel missing).
#   bullseye-full (Debian 11 x86_64, glibc 2.31, Python 3.9):
#     version            `ddprun --version` names the wheel's version
#     python-m           `python -m ddprun --version`
#     standalone         `ddprun --standalone --nproc_per_node=2 --no-python ddprun-allreduce-check`
#                        (gloo allreduce of float, double, int32, int64, checked exactly, exit 0)
#     static-2node       two agents, --nnodes=2 --node_rank=0/1 --master_addr=127.0.0.1
#                        --master_port=P (a free port), one worker each, both exit 0
#     c10d-auth          two agents, --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:P
#                        --rdzv_conf token_file=... (a 32-byte token, mode 600): the authenticated
#                        rendezvous (docs/reliability.md), one worker each, both exit 0; before
#                        the second joins, `ddprun-store` without the token is refused
#     numa-dry-run       `--numa-binding=node --nproc_per_node=2 --dry-run` prints a plan with a
#                        numa_binding line and each worker's cpus
#     man                `MANPATH=/opt/ddprun-venv/share/man man -P cat ddprun` names ddprun
#     completion         `ddprun --print-completion bash` is not empty
#   arm64-allreduce (Debian 12 arm64 under qemu): version and standalone, with generous timeouts
#   (qemu runs the programs 10 to 50 times slower).
# - DDPRUN_CHECK_TIMEOUT=SECONDS overrides each check's timeout; DDPRUN_CHECK_VERBOSE=1 shows
#   the output of the checks that pass too.
set -euo pipefail
# The whole script is one block, read before it runs: editing the file while it runs (minutes
# under qemu) cannot change what a running copy does.
{
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=root-lib.sh
. "$here/root-lib.sh"
usage="usage: check-in-root.sh ROOT WHEEL [bullseye-full|arm64-allreduce]"
root="${1:?$usage}"
wheel="${2:?$usage}"
mode="${3:-}"

if [ "$(id -u)" -ne 0 ]; then
  echo "check-in-root: needs root (chroot, mounts)" >&2
  exit 2
fi
if [ ! -d "$root" ] || [ ! -x "$root/bin/sh" ]; then
  echo "check-in-root: $root is not a root (make-root.sh makes one)" >&2
  exit 2
fi
[ -f "$wheel" ] || { echo "check-in-root: no wheel $wheel" >&2; exit 2; }
root="$(cd "$root" && pwd)"
wheel="$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")"
wheel_name="$(basename "$wheel")"
case "$wheel_name" in
  *_x86_64.whl) wheel_arch=amd64; default_mode=bullseye-full ;;
  *_aarch64.whl) wheel_arch=arm64; default_mode=arm64-allreduce ;;
  *) echo "check-in-root: $wheel_name is not an x86_64 or aarch64 wheel" >&2; exit 2 ;;
esac
mode="${mode:-$default_mode}"
case "$mode" in
  bullseye-full|arm64-allreduce) ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
# The wheel's version: the second field of its file name (PEP 427).
version="$(echo "$wheel_name" | cut -d- -f2)"

# The root's architecture, from the ELF header of its dash (e_machine: 0x3e x86_64, 0xb7
# aarch64), so that a wheel is never checked in a root of another architecture.
case "$(od -An -tx1 -j18 -N1 "$root/bin/dash" 2>/dev/null | tr -d ' ' || true)" in
  3e) root_arch=amd64 ;;
  b7) root_arch=arm64 ;;
  *) root_arch=unknown ;;
esac
if [ "$root_arch" != "$wheel_arch" ]; then
  echo "check-in-root: $wheel_name is for $wheel_arch, $root is $root_arch" >&2
  exit 2
fi

# Into a private mount namespace (once): the mounts below are this script's alone.
if [ -z "${DDPRUN_CHECK_IN_ROOT_NS:-}" ]; then
  DDPRUN_CHECK_IN_ROOT_NS=1 exec unshare --mount --propagation private -- \
    "$0" "$root" "$wheel" "$mode"
fi

token=/tmp/ddprun-check.token
venv=/opt/ddprun-venv
mounted=()
made_hosts=""
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount -R "${mounted[i]}" 2>/dev/null || umount -R -l "${mounted[i]}" 2>/dev/null || true
  done
  rm -f "$root/tmp/$wheel_name" "$root$token"
  [ -z "$made_hosts" ] || rm -f "$root/etc/hosts"
  rm -rf "$work"
}
work="$(mktemp -d)"
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

mount -t proc proc "$root/proc"
mounted+=("$root/proc")
mount --rbind /dev "$root/dev"
mounted+=("$root/dev")
mount --rbind /sys "$root/sys"
mounted+=("$root/sys")
# A debootstrap root has no /etc/hosts, so `localhost` (the standalone rendezvous) and this
# machine's name (an agent's default address) would not resolve: the machine's own is bound in,
# as a container runtime does.
if [ ! -e "$root/etc/hosts" ]; then
  : >"$root/etc/hosts"
  made_hosts=1
fi
mount --bind -o ro /etc/hosts "$root/etc/hosts"
mounted+=("$root/etc/hosts")

root_runner "$root" "$root_arch"
if [ "$root_arch" = arm64 ]; then
  default_timeout=300
else
  default_timeout=60
fi

# in_root SECONDS COMMAND...: runs COMMAND in the root with a clean environment (extra
# VAR=value words may lead COMMAND, as env takes them).
in_root() {
  local seconds="$1"
  shift
  local envs=("PATH=$venv/bin:/usr/bin:/bin" HOME=/root LANG=C.UTF-8)
  if [ "$ROOT_QEMU" = explicit ]; then
    # qemu runs one program: the environment is set outside the chroot, the path resolved here.
    local cmd="$1"
    while [[ "$cmd" == *=* ]]; do envs+=("$cmd"); shift; cmd="$1"; done
    shift
    local dir
    if [[ "$cmd" != /* ]]; then
      for dir in $venv/bin /usr/bin /bin; do
        if [ -x "$root$dir/$cmd" ]; then cmd="$dir/$cmd"; break; fi
      done
    fi
    timeout -k 10 "$seconds" env -i "${envs[@]}" "${ROOT_RUN[@]}" "$cmd" "$@"
  else
    timeout -k 10 "$seconds" "${ROOT_RUN[@]}" env -i "${envs[@]}" "$@"
  fi
}

failures=()
# report NAME RC START OUTPUT [WHY]: the PASS/FAIL line of one check.
report() {
  local name="$1" rc="$2" start="$3" output="$4" why="${5:-}"
  local took=$((SECONDS - start))
  if [ "$rc" -eq 0 ] && [ -z "$why" ]; then
    echo "PASS $name (${took} s)"
    [ -z "${DDPRUN_CHECK_VERBOSE:-}" ] || sed 's/^/    /' "$output"
  else
    [ -n "$why" ] || why="exit $rc"
    [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || why="timed out"
    echo "FAIL $name ($why, ${took} s)"
    tail -n 30 "$output" | sed 's/^/    /'
    failures+=("$name")
  fi
}

# check NAME [expect=REGEX] [timeout=SECONDS] COMMAND...: one check, COMMAND in the root; with
# expect=, its output must also match REGEX (grep -E).
check() {
  local name="$1" expect="" seconds="${DDPRUN_CHECK_TIMEOUT:-$default_timeout}" rc=0
  shift
  while :; do
    case "$1" in
      expect=*) expect="${1#expect=}"; shift ;;
      timeout=*) seconds="${DDPRUN_CHECK_TIMEOUT:-${1#timeout=}}"; shift ;;
      *) break ;;
    esac
  done
  local output="$work/$name.log" start=$SECONDS why=""
  in_root "$seconds" "$@" >"$output" 2>&1 </dev/null || rc=$?
  if [ "$rc" -eq 0 ] && [ -n "$expect" ] && ! grep -Eq -- "$expect" "$output"; then
    why="output does not match /$expect/"
  fi
  report "$name" "$rc" "$start" "$output" "$why"
}

# check_two NAME COMMAND0 -- COMMAND1: two agents of one job, run together; both must exit 0.
check_two() {
  local name="$1" seconds="${DDPRUN_CHECK_TIMEOUT:-$default_timeout}"
  shift
  local first=() rc0=0 rc1=0 start=$SECONDS pid
  while [ "$1" != -- ]; do first+=("$1"); shift; done
  shift
  in_root "$seconds" "$@" >"$work/$name.1.log" 2>&1 </dev/null &
  pid=$!
  in_root "$seconds" "${first[@]}" >"$work/$name.0.log" 2>&1 </dev/null || rc0=$?
  wait "$pid" || rc1=$?
  {
    echo "--- node 0 (exit $rc0)"; cat "$work/$name.0.log"
    echo "--- node 1 (exit $rc1)"; cat "$work/$name.1.log"
  } >"$work/$name.log"
  local why=""
  [ "$rc0" -eq 0 ] || why="node 0 exit $rc0"
  [ "$rc1" -eq 0 ] || why="${why:+$why, }node 1 exit $rc1"
  report "$name" "$(( rc0 > rc1 ? rc0 : rc1 ))" "$start" "$work/$name.log" "$why"
}

# check_c10d_auth PORT COMMAND: the authenticated c10d job. Node 0 starts and waits for node 1
# at the store on PORT, which answers a client with the token (ddprun-store num-keys); a client
# without it is refused ("requires a token", and node 0 logs the refusal); then node 1 joins and
# both agents' jobs exit 0.
check_c10d_auth() {
  local name=c10d-auth port="$1" seconds="${DDPRUN_CHECK_TIMEOUT:-$default_timeout}"
  shift
  local rc0=0 rc1=0 start=$SECONDS pid why="" try
  local store=(ddprun-store num-keys --port "$port" --connect-timeout 1 --timeout 5)
  in_root "$seconds" "$@" >"$work/$name.0.log" 2>&1 </dev/null &
  pid=$!
  for try in $(seq 1 "$seconds"); do
    ! in_root 10 "${store[@]}" --token-file "$token" >"$work/$name.store.log" 2>&1 </dev/null ||
      break
    [ "$try" -lt "$seconds" ] || why="the store on port $port never answered"
    sleep 1
  done
  if [ -z "$why" ]; then
    if in_root 10 "${store[@]}" >"$work/$name.stranger.log" 2>&1 </dev/null; then
      why="a client without the token was served"
    elif ! grep -q "requires a token" "$work/$name.stranger.log"; then
      why="a client without the token was not told it needs one"
    fi
  fi
  in_root "$seconds" "$@" >"$work/$name.1.log" 2>&1 </dev/null || rc1=$?
  wait "$pid" || rc0=$?
  {
    echo "--- node 0 (exit $rc0)"; cat "$work/$name.0.log"
    echo "--- a client without the token"; cat "$work/$name.stranger.log" 2>/dev/null || :
    echo "--- node 1 (exit $rc1)"; cat "$work/$name.1.log"
  } >"$work/$name.log"
  [ "$rc0" -eq 0 ] || why="${why:+$why, }node 0 exit $rc0"
  [ "$rc1" -eq 0 ] || why="${why:+$why, }node 1 exit $rc1"
  if [ -z "$why" ] && ! grep -q "refused the connection" "$work/$name.0.log"; then
    why="node 0 did not log the refusal"
  fi
  report "$name" "$(( rc0 > rc1 ? rc0 : rc1 ))" "$start" "$work/$name.log" "$why"
}

# A port nothing listens on now (the root shares this machine's network).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

echo "check-in-root: $wheel_name in $root ($mode; $root_arch programs: $ROOT_QEMU)"
start=$SECONDS
cp "$wheel" "$root/tmp/$wheel_name"
rm -rf --one-file-system "${root:?}$venv"
if ! in_root 600 python3 -m venv "$venv" >"$work/venv.log" 2>&1 </dev/null; then
  report venv 1 "$start" "$work/venv.log"
  exit 1
fi
if ! in_root 600 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
    python3 -m pip install --no-index "/tmp/$wheel_name" >"$work/pip.log" 2>&1 </dev/null; then
  report pip-install 1 "$start" "$work/pip.log"
  exit 1
fi
python="$(in_root 60 python3 --version 2>&1 || true)"
glibc="$(in_root 60 ldd --version 2>&1 | head -n 1 | sed 's/^ldd //' || true)"
echo "check-in-root: installed into $venv in $((SECONDS - start)) s ($python, glibc $glibc)"

allreduce=(ddprun-allreduce-check --timeout "$((default_timeout - 10))")
case "$mode" in
  bullseye-full)
    check version expect="^ddprun ${version//./\\.}( |$)" ddprun --version
    check python-m expect="^ddprun ${version//./\\.}( |$)" python -m ddprun --version
    check standalone expect="rank 1/2 ok" \
      ddprun --standalone --nproc_per_node=2 --no-python "${allreduce[@]}"
    port="$(free_port)"
    check_two static-2node \
      ddprun --nnodes=2 --node_rank=0 --master_addr=127.0.0.1 --master_port="$port" \
        --nproc_per_node=1 --no-python "${allreduce[@]}" -- \
      ddprun --nnodes=2 --node_rank=1 --master_addr=127.0.0.1 --master_port="$port" \
        --nproc_per_node=1 --no-python "${allreduce[@]}"
    head -c 32 /dev/urandom | base64 >"$root$token"
    chmod 600 "$root$token"
    port="$(free_port)"
    c10d=(ddprun --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$port" --rdzv_id=check-in-root
      --rdzv_conf "token_file=$token" --nnodes=2 --nproc_per_node=1 --no-python "${allreduce[@]}")
    check_c10d_auth "$port" "${c10d[@]}"
    check numa-dry-run expect="cpus: " \
      ddprun --numa-binding=node --nproc_per_node=2 --dry-run --no-python ddprun-allreduce-check
    check man expect="ddprun" MANPATH=$venv/share/man man -P cat ddprun
    check completion expect="complete" ddprun --print-completion bash
    ;;
  arm64-allreduce)
    check version expect="^ddprun ${version//./\\.}( |$)" ddprun --version
    check standalone expect="rank 1/2 ok" \
      ddprun --standalone --nproc_per_node=2 --no-python "${allreduce[@]}"
    ;;
esac

if [ "${#failures[@]}" -ne 0 ]; then
  echo "check-in-root: FAILED ${failures[*]} ($mode, $((SECONDS - start)) s)"
  exit 1
fi
echo "check-in-root: all passed ($mode, $((SECONDS - start)) s)"
exit
}
