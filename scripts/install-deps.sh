#!/usr/bin/env bash
# Installs the Debian 12 packages ddprun needs to build, test, document and package itself;
# with --demo, only those `make demo` needs (build ddprun, run the demo).
# Idempotent and fast: apt is only touched when a package is missing.
set -euo pipefail

demo_packages=(
  cmake g++ make
  libboost1.74-dev
  libcli11-dev nlohmann-json3-dev libspdlog-dev catch2 libgloo-dev
  libssl-dev   # HMAC-SHA256 and random nonces of the authenticated store (docs/reliability.md)
  libhwloc-dev pkg-config   # --numa-binding reads the CPU topology with hwloc (hwloc.pc)
  prometheus-cpp-dev   # --health-port's /metrics: Registry and TextSerializer (launcher/telemetry/)
  python3 python3-torch   # Debian's PyTorch 1.13 for /usr/bin/python3 (no recommends: ~1.5 GB of Qt)
)
packages=(
  "${demo_packages[@]}"
  scdoc iproute2 procps time
  ccache   # CI's fresh clones recompile only what changed (CMakeLists.txt, DDPRUN_CCACHE)
  iptables   # make chaos: partitions (DROP) and packet loss (statistic match) per simulated host
  clang libclang-rt-14-dev   # make fuzz: clang++ and libFuzzer (a recommend of clang, so named)
  clang-format   # make check: integration.test_format (scripts/check_format.py); make format
  # make package / check-package (packaging/): dpkg-shlibdeps, file, rpmbuild, lintian; the
  # installed package's man pages, completion (bash, zsh, fish) and pkg-config file
  dpkg-dev file rpm lintian man-db bash-completion zsh fish pkg-config
  devscripts   # make check-package: hardening-check on every program and library of the .deb
  elfutils     # eu-strip, which rpmbuild's find-debuginfo needs for the -debuginfo .rpm
  cpio         # check-package reads files out of the .rpm packages (rpm2cpio | cpio)
  etcd-server   # the etcd rendezvous' tests start real etcd members on loopback (not the service)
  # tests/integration/test_slurm.py starts a real Slurm cluster (slurmctld, slurmd per network
  # namespace, munged) under a temp dir; the packages' own services are not used (see below)
  slurmctld slurmd slurm-client munge
  # the wheel's checks on other distributions (packaging/wheel/make-root.sh): a Debian 11
  # root, and a Debian 12 arm64 root whose programs run under qemu
  debootstrap qemu-user-static
  libc6-arm64-cross   # make wheel: the aarch64 build runs its programs (completion) under qemu
)
if [ "${1:-}" = "--demo" ]; then
  packages=("${demo_packages[@]}")
fi

missing=()
for pkg in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  [ "$status" = "install ok installed" ] || missing+=("$pkg")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install-deps: missing packages (${missing[*]}) and not root, no sudo: install them as root" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
# No service may start while installing: slurmctld's, slurmd's and munge's postinst scripts fail
# the install ("invoke-rc.d ... || exit 1") when their daemon cannot start without a
# configuration. A policy-rc.d that denies every start (as Debian's container images ship) is
# put in place for the install when there is none, and removed afterwards.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod 755 "$policy"
  trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null

# Installing munge, slurmd and slurmctld starts their system services where an init system lets
# it (a container's policy-rc.d usually does not). The Slurm tests start their own daemons under a
# temp dir and need none of them: stop what this install started, so that nothing is left running.
for service in slurmctld slurmd munge; do
  case " ${missing[*]} " in *" $service "*) ;; *) continue ;; esac
  if [ -d /run/systemd/system ]; then
    "${sudo[@]}" systemctl stop "$service" >/dev/null 2>&1 || true
  elif command -v invoke-rc.d >/dev/null 2>&1; then
    "${sudo[@]}" invoke-rc.d "$service" stop >/dev/null 2>&1 || true
  fi
done
