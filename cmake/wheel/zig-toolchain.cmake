# The portable wheel's toolchain (docs/packaging.md): zig c++ for glibc 2.28 and LLVM's libc++
# linked statically, through the compiler wrappers packaging/wheel/build-deps.sh made in the
# dependency prefix DDPRUN_WHEEL_DEPS (which also holds the static dependencies).
#   cmake -S . -B build-wheel-x86_64 -DDDPRUN_WHEEL=ON -DDDPRUN_WHEEL_ARCH=x86_64 \
#         -DDDPRUN_WHEEL_DEPS=~/.cache/ddprun/wheel/deps-x86_64
set(DDPRUN_WHEEL_ARCH "x86_64" CACHE STRING "The wheel's architecture: x86_64 or aarch64")
set(DDPRUN_WHEEL_DEPS "$ENV{HOME}/.cache/ddprun/wheel/deps-${DDPRUN_WHEEL_ARCH}" CACHE PATH
  "The dependency prefix packaging/wheel/build-deps.sh made for DDPRUN_WHEEL_ARCH")
if(NOT EXISTS "${DDPRUN_WHEEL_DEPS}/.ddprun-deps-key")
  message(FATAL_ERROR "no wheel dependencies in ${DDPRUN_WHEEL_DEPS}: run "
    "packaging/wheel/build-deps.sh ${DDPRUN_WHEEL_ARCH} ${DDPRUN_WHEEL_DEPS} first")
endif()
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ${DDPRUN_WHEEL_ARCH})
set(CMAKE_C_COMPILER "${DDPRUN_WHEEL_DEPS}/bin/zig-cc")
set(CMAKE_CXX_COMPILER "${DDPRUN_WHEEL_DEPS}/bin/zig-c++")
set(CMAKE_AR "${DDPRUN_WHEEL_DEPS}/bin/zig-ar" CACHE FILEPATH "")
set(CMAKE_RANLIB "${DDPRUN_WHEEL_DEPS}/bin/zig-ranlib" CACHE FILEPATH "")
# Only the prefix: nothing of this machine's /usr (its glibc is 2.36) may leak into the build.
set(CMAKE_FIND_ROOT_PATH "${DDPRUN_WHEEL_DEPS}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The programs made at build time (completion scripts) run here: natively for x86_64, under
# qemu-user for aarch64.
if(DDPRUN_WHEEL_ARCH STREQUAL "aarch64")
  find_program(DDPRUN_QEMU_AARCH64 qemu-aarch64-static)
  if(DDPRUN_QEMU_AARCH64)
    set(CMAKE_CROSSCOMPILING_EMULATOR "${DDPRUN_QEMU_AARCH64}")
  endif()
endif()
