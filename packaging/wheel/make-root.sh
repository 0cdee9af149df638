#!/usr/bin/env bash
# Makes a minimal Debian root in which the wheels are checked (issue 38; docs/packaging.md,
# packaging/wheel/check-in-root.sh):
#   packaging/wheel/make-root.sh SUITE ARCH [DEST]
# SUITE: a Debian suite (bullseye: glibc 2.31, Python 3.9; bookworm: glibc 2.36, Python 3.11).
# ARCH: Debian's architecture name, amd64 or arm64 (arm64 on an amd64 host runs under
# qemu-user-static; see root-lib.sh for how, binfmt_misc or explicit qemu).
# DEST: default ~/.cache/ddprun/wheel/roots/SUITE-ARCH (under $XDG_CACHE_HOME when set).
#
# Contract:
# - `debootstrap --variant=minbase` with python3, python3-venv, python3-pip, man-db and procps,
#   from the Debian mirror this machine's apt already uses (the first binary `deb` entry of
#   /etc/apt/sources.list or /etc/apt/sources.list.d/*.{list,sources} whose URI ends in /debian,
#   with a suite that is not a security, updates or backports one; DDPRUN_DEBIAN_MIRROR
#   overrides it); nothing else is downloaded. A foreign ARCH is made in two stages:
#   `debootstrap --foreign --arch=ARCH`, qemu-aarch64-static copied into the root's /usr/bin,
#   then the second stage run in the root under qemu.
# - Cached: a finished root holds DEST/.ddprun-root-key, the key of the suite, the architecture,
#   the package list and the hash of this script and root-lib.sh; while it equals this run's key
#   DEST is left alone (a second run takes a fraction of a second). Otherwise the root is made
#   afresh in DEST.new and moved to DEST when complete, so that DEST is never half made.
#   Runs on the same DEST are serialised (flock on DEST.lock).
# - Needs root (debootstrap, chroot, mounts) and the host tools debootstrap and qemu-user-static
#   (scripts/install-deps.sh installs them). Refuses to replace a root with anything mounted in
#   it (a check-in-root.sh still running).
# - Prints the time it took; exit status 0 when DEST is ready.
set -euo pipefail
# The whole script is one block, read before it runs: editing the file while it runs for minutes
# cannot change what a running copy does.
{
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=root-lib.sh
. "$here/root-lib.sh"
usage="usage: make-root.sh SUITE ARCH [DEST]"
suite="${1:?$usage}"
arch="${2:?$usage}"
dest="${3:-${XDG_CACHE_HOME:-$HOME/.cache}/ddprun/wheel/roots/$suite-$arch}"
packages=(python3 python3-venv python3-pip man-db procps)

if [ "$(id -u)" -ne 0 ]; then
  echo "make-root: needs root (debootstrap, chroot)" >&2
  exit 2
fi
for tool in debootstrap chroot flock; do
  if ! command -v "$tool" >/dev/null; then
    echo "make-root: $tool not found: run scripts/install-deps.sh" >&2
    exit 2
  fi
done
host_arch="$(root_host_arch)"
foreign=0
if [ "$arch" != "$host_arch" ]; then
  foreign=1
  if [ "$arch" != arm64 ] || [ ! -x "$ROOT_QEMU_AARCH64" ]; then
    echo "make-root: a foreign root is arm64 only, and needs $ROOT_QEMU_AARCH64" \
      "(scripts/install-deps.sh)" >&2
    exit 2
  fi
fi

script_hash="$(cat "$0" "$here/root-lib.sh" | sha256sum | cut -c1-16)"
key="suite=$suite arch=$arch packages=${packages[*]} script=$script_hash"
mkdir -p "$(dirname "$dest")"
dest="$(cd "$(dirname "$dest")" && pwd)/$(basename "$dest")"
exec 9>"$dest.lock"
flock 9
if [ "$(cat "$dest/.ddprun-root-key" 2>/dev/null)" = "$key" ]; then
  echo "make-root: $dest is up to date ($key)"
  exit 0
fi

# The mirror: the URI of apt's first binary Debian entry (one-line .list or deb822 .sources).
mirror() {
  local file
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$file" ] || continue
    awk '$1 == "deb" {
           for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/ && $i !~ /=/) break
           if ($(i + 1) !~ /-(security|updates|backports)$/) { print $i; exit }
         }' "$file"
  done
  for file in /etc/apt/sources.list.d/*.sources; do
    [ -r "$file" ] || continue
    # deb822 stanzas, separated by blank lines; a field's value may continue on indented lines.
    awk 'function flush() {
           if (types ~ /(^| )deb( |$)/ && uris != "") {
             n = split(suites, s, " ")
             for (i = 1; i <= n; i++) if (s[i] !~ /-(security|updates|backports)$/) {
               split(uris, u, " "); print u[1]; exit
             }
           }
           types = ""; uris = ""; suites = ""
         }
         /^[ \t]*$/ { flush(); next }
         /^#/ { next }
         /^[A-Za-z-]+:/ {
           field = tolower($1); sub(/:.*/, "", field)
           value = $0; sub(/^[^:]*:[ \t]*/, "", value)
         }
         /^[ \t]/ { value = $0 }
         field == "types" { types = types " " value }
         field == "uris" { uris = uris " " value }
         field == "suites" { suites = suites " " value }
         END { flush() }' "$file"
  done
}
mirror="${DDPRUN_DEBIAN_MIRROR:-$(mirror | sed 's/^ *//' | grep -E '/debian/?$' | head -n 1 || :)}"
if [ -z "$mirror" ]; then
  echo "make-root: no Debian mirror found in /etc/apt/sources.list{,.d}" >&2
  exit 2
fi

if grep -q " $dest[/ ]" /proc/mounts || grep -q " $dest.new[/ ]" /proc/mounts; then
  echo "make-root: something is mounted under $dest (debootstrap or a check still running?):" \
    "not replacing it" >&2
  exit 1
fi
new="$dest.new"
rm -rf --one-file-system "$new"
start=$SECONDS
echo "make-root: $suite $arch from $mirror into $dest (${packages[*]})"
include="$(IFS=,; echo "${packages[*]}")"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
stage() {
  # debootstrap is quiet on success; its log is shown when it fails.
  if ! nice -n 19 "$@" >"$log" 2>&1; then
    grep -v " URL:" "$log" | tail -n 40 >&2
    [ ! -f "$new/debootstrap/debootstrap.log" ] || tail -n 40 "$new/debootstrap/debootstrap.log" >&2
    echo "make-root: failed: $*" >&2
    exit 1
  fi
}
if [ "$foreign" -eq 0 ]; then
  stage debootstrap --variant=minbase --include="$include" "$suite" "$new" "$mirror"
else
  stage debootstrap --foreign --arch="$arch" --variant=minbase --include="$include" \
    "$suite" "$new" "$mirror"
  echo "make-root: first stage done ($((SECONDS - start)) s); second stage under qemu"
  cp "$ROOT_QEMU_AARCH64" "$new/usr/bin/"
  root_runner "$new" "$arch"
  echo "make-root: arm64 programs run with: $ROOT_QEMU"
  stage "${ROOT_RUN[@]}" /bin/sh /debootstrap/debootstrap --second-stage
fi
# No apt cache or lists are needed in the root (pip installs from a local wheel).
rm -rf "$new"/var/cache/apt/archives/*.deb "$new"/var/lib/apt/lists/*_Packages
printf '%s\n' "$key" > "$new/.ddprun-root-key"
rm -rf --one-file-system "$dest"
mv "$new" "$dest"
echo "make-root: $dest ready in $((SECONDS - start)) s ($(du -sm "$dest" | cut -f1) MiB)"
exit
}
