#!/usr/bin/env bash
# Fetches and unpacks the wheel's dependency sources (packaging/wheel/deps.txt) from Debian's
# source packages into DEST/<name>/ (upstream tarball, Debian's patches applied): one tree per
# package, reused when DEST/<name>/.ddprun-version already names the version. Needs root the
# first time: it adds deb-src entries for the suites deps.txt names (the machine's own Debian
# mirror) and runs apt-get update.
#   packaging/wheel/fetch-sources.sh DEST
# The .dsc is not needed (this workplace's mirror answers 404 for some): each file is checked
# against the SHA-256 of the signed Sources index (apt-cache showsrc), then unpacked by hand.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:?usage: fetch-sources.sh DEST}"
mkdir -p "$dest/downloads"
dest="$(cd "$dest" && pwd)"

list=/etc/apt/sources.list.d/ddprun-wheel-src.sources
suites="$(grep -v '^#' "$here/deps.txt" | awk 'NF >= 3 {print $3}' | sort -u | tr '\n' ' ')"
if [ ! -f "$list" ] || ! grep -q "^Suites: ${suites% }$" "$list"; then
  [ "$(id -u)" -eq 0 ] || { echo "fetch-sources: run once as root (deb-src for: $suites)" >&2; exit 1; }
  uri="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null ||
    true)"
  printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
    "${uri:-http://deb.debian.org/debian}" "${suites% }" \
    /usr/share/keyrings/debian-archive-keyring.gpg > "$list"
  apt-get update -qq
fi

# "sha256 size name" of every file of source package $1 at version $2, from the Sources index.
files_of() {
  apt-cache showsrc "$1" | awk -v version="$2" '
    /^Package:/ {in_pkg = 0} /^Version:/ {in_pkg = ($2 == version)}
    in_pkg && /^Checksums-Sha256:/ {sums = 1; next}
    sums && /^ / {print $1, $2, $3; next} {sums = 0}'
}

# The pinned version if the index has it, else the newest of the same upstream release.
pick_version() {
  local name="$1" pinned="$2" upstream
  if apt-cache showsrc "$name" | grep -x "Version: $pinned" >/dev/null; then echo "$pinned"; return; fi
  upstream="${pinned%-*}"
  local newest
  newest="$(apt-cache showsrc "$name" | awk '/^Version:/ {print $2}' |
    grep -F "${upstream%.*}" | sort -V | tail -n 1 || true)"
  [ -n "$newest" ] || { echo "fetch-sources: no source of $name $pinned in the archive" >&2; exit 1; }
  echo "fetch-sources: $name $pinned is not served any more; using $newest (update deps.txt)" >&2
  echo "$newest"
}

fetch_one() {
  local name="$1" version="$2" tree="$dest/$1"
  if [ "$(cat "$tree/.ddprun-version" 2>/dev/null)" = "$version" ]; then return; fi
  (cd "$dest/downloads" && apt-get source -qq --download-only "$name=$version" >/dev/null 2>&1 ||
    true)
  local orig="" debian=""
  while read -r sum size file; do
    case "$file" in *.dsc|*.asc) continue ;; esac
    local path="$dest/downloads/$file"
    if [ ! -f "$path" ] || [ "$(sha256sum < "$path" | cut -d' ' -f1)" != "$sum" ]; then
      echo "fetch-sources: $file ($size bytes) of $name $version did not download intact" >&2
      exit 1
    fi
    case "$file" in *.debian.tar.*) debian="$path" ;; *.orig.tar.*) orig="$path" ;; esac
  done < <(files_of "$name" "$version")
  [ -n "$orig" ] || { echo "fetch-sources: no upstream tarball for $name $version" >&2; exit 1; }
  rm -rf "$tree" && mkdir -p "$tree"
  # Most upstream tarballs hold one top folder; some (gloo's) hold the tree itself.
  local strip=1
  [ "$(tar -tf "$orig" | cut -d/ -f1 | sort -u | wc -l)" -eq 1 ] || strip=0
  tar -xf "$orig" -C "$tree" --strip-components="$strip"
  if [ -n "$debian" ]; then
    tar -xf "$debian" -C "$tree"
    if [ -f "$tree/debian/patches/series" ]; then
      while read -r patch _; do
        case "$patch" in ''|'#'*) continue ;; esac
        patch -d "$tree" -p1 -s -N < "$tree/debian/patches/$patch"
      done < "$tree/debian/patches/series"
    fi
  fi
  echo "$version" > "$tree/.ddprun-version"
  echo "fetch-sources: $name $version in $tree"
}

while read -r name pinned _suite; do
  case "$name" in ''|'#'*) continue ;; esac
  fetch_one "$name" "$(pick_version "$name" "$pinned")"
done < "$here/deps.txt"
