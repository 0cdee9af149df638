#!/usr/bin/env bash
# Builds the wheel's compiled dependencies (docs/packaging.md) for one target with zig, static,
# into PREFIX: OpenSSL (libssl, libcrypto), hwloc, prometheus-cpp (core), gloo. Sources come from
# packaging/wheel/fetch-sources.sh; the compilers are wrappers around `python -m ziglang`.
#   packaging/wheel/build-deps.sh ARCH PREFIX [ZIG_PYTHON]
# ARCH: x86_64 or aarch64 (glibc 2.28). ZIG_PYTHON: a python with the ziglang package (default:
# the wheel tools venv). A finished PREFIX (PREFIX/.ddprun-deps-key equal to this build's key:
# the target, zig's version, the sources' versions and this script) is left as it is.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
arch="${1:?usage: build-deps.sh ARCH PREFIX [ZIG_PYTHON]}"
prefix="${2:?usage: build-deps.sh ARCH PREFIX [ZIG_PYTHON]}"
zig_python="${3:-${XDG_CACHE_HOME:-$HOME/.cache}/ddprun/wheel-tools/bin/python}"
case "$arch" in
  x86_64) openssl_target=linux-x86_64 ;;
  aarch64) openssl_target=linux-aarch64 ;;
  *) echo "build-deps: ARCH must be x86_64 or aarch64, not '$arch'" >&2; exit 2 ;;
esac
triple="$arch-linux-gnu.2.28"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/ddprun/wheel"
sources="$cache/sources"
"$here/fetch-sources.sh" "$sources"

key="$triple zig-$("$zig_python" -m ziglang version) $(cat "$sources"/*/.ddprun-version | tr '\n' ' ')$(sha256sum "$0" | cut -c1-16)"
if [ "$(cat "$prefix/.ddprun-deps-key" 2>/dev/null)" = "$key" ]; then
  echo "build-deps: $prefix is up to date ($key)"
  exit 0
fi
rm -rf "$prefix" && mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
jobs="$(nproc)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The compilers: zig for the target, as executables that configure scripts and CMake can run
# (for this build only: cmake/wheel/zig-toolchain.cmake makes its own for the Python it runs).
tools="$work/bin"
mkdir -p "$tools"
for tool in cc c++ ar ranlib; do
  case "$tool" in
    cc|c++) command="\"$zig_python\" -m ziglang $tool -target $triple" ;;
    *) command="\"$zig_python\" -m ziglang $tool" ;;
  esac
  printf '#!/bin/sh\nexec %s "$@"\n' "$command" > "$tools/zig-$tool"
  chmod +x "$tools/zig-$tool"
done
export CC="$tools/zig-cc" CXX="$tools/zig-c++" AR="$tools/zig-ar" RANLIB="$tools/zig-ranlib"
cmake_common=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix"
  -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX"
  -DCMAKE_AR="$AR" -DCMAKE_RANLIB="$RANLIB" -DCMAKE_SYSTEM_NAME=Linux
  -DCMAKE_SYSTEM_PROCESSOR="$arch" -DBUILD_SHARED_LIBS=OFF
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON)

build_openssl() {
  cp -a "$sources/openssl" "$work/openssl"
  (cd "$work/openssl" &&
    ./Configure "$openssl_target" no-shared no-tests no-engine no-dso \
      no-module --prefix="$prefix" --libdir=lib --openssldir=/etc/ssl >/dev/null &&
    make -s -j"$jobs" build_libs >/dev/null && make -s install_dev >/dev/null)
}

build_hwloc() {
  cp -a "$sources/hwloc" "$work/hwloc"
  (cd "$work/hwloc" &&
    ./configure -q --host="$arch-linux-gnu" --prefix="$prefix" --libdir="$prefix/lib" \
      --enable-static --disable-shared --disable-libxml2 --disable-cairo --disable-opencl \
      --disable-cuda --disable-nvml --disable-rsmi --disable-levelzero --disable-gl \
      --disable-pci --disable-libudev --disable-plugin-dlopen --disable-doxygen \
      --disable-readme >/dev/null &&
    make -s -j"$jobs" -C hwloc >/dev/null && make -s -C hwloc install >/dev/null &&
    make -s -C include install >/dev/null && make -s install-hwlocpkgconfigDATA >/dev/null)
}

build_prometheus() {
  cmake -S "$sources/prometheus-cpp" -B "$work/prometheus" "${cmake_common[@]}" \
    -DENABLE_PULL=OFF -DENABLE_PUSH=OFF -DENABLE_COMPRESSION=OFF -DENABLE_TESTING=OFF \
    -DUSE_THIRDPARTY_LIBRARIES=OFF -DGENERATE_PKGCONFIG=OFF >/dev/null
  cmake --build "$work/prometheus" -j"$jobs" >/dev/null
  cmake --install "$work/prometheus" >/dev/null
}

build_gloo() {
  cmake -S "$sources/gloo" -B "$work/gloo" "${cmake_common[@]}" -DBUILD_TESTING=OFF \
    -DUSE_REDIS=OFF -DUSE_IBVERBS=OFF -DUSE_MPI=OFF -DUSE_CUDA=OFF -DUSE_LIBUV=OFF >/dev/null
  cmake --build "$work/gloo" -j"$jobs" >/dev/null
  cmake --install "$work/gloo" >/dev/null
}

for dependency in hwloc prometheus gloo openssl; do
  start=$SECONDS
  "build_$dependency"
  echo "build-deps: $dependency for $triple in $((SECONDS - start)) s"
done
echo "$key" > "$prefix/.ddprun-deps-key"
