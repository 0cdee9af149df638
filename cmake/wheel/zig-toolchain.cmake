# The portable wheel's toolchain (docs/packaging.md): zig c++ for glibc 2.28 and LLVM's libc++
# linked statically, with the static dependencies packaging/wheel/build-deps.sh makes in the
# prefix DDPRUN_WHEEL_DEPS.
#   cmake -S . -B build-wheel-x86_64 -DDDPRUN_WHEEL=ON -DDDPRUN_WHEEL_ARCH=x86_64 \
#         -DDDPRUN_WHEEL_DEPS=~/.cache/ddprun/wheel/deps-x86_64
set(DDPRUN_WHEEL_ARCH "x86_64" CACHE STRING "The wheel's architecture: x86_64 or aarch64")
set(DDPRUN_WHEEL_DEPS "$ENV{HOME}/.cache/ddprun/wheel/deps-${DDPRUN_WHEEL_ARCH}" CACHE PATH
  "The dependency prefix packaging/wheel/build-deps.sh made for DDPRUN_WHEEL_ARCH")
# The Python whose ziglang package is the compiler, kept in the environment so that the
# try_compile projects CMake runs in this process see the same: $DDPRUN_ZIG_PYTHON, else the
# Python scikit-build-core runs (pip wheel . / python -m build: the build requirements hold
# ziglang), else the wheel tools venv scripts/setup-wheel-tools.sh makes.
if(NOT DEFINED ENV{DDPRUN_ZIG_PYTHON})
  set(_ddprun_zig_python "$ENV{HOME}/.cache/ddprun/wheel-tools/bin/python")
  if(Python_EXECUTABLE)
    execute_process(COMMAND "${Python_EXECUTABLE}" -c "import ziglang"
      RESULT_VARIABLE _ddprun_no_zig OUTPUT_QUIET ERROR_QUIET)
    if(_ddprun_no_zig EQUAL 0)
      set(_ddprun_zig_python "${Python_EXECUTABLE}")
    endif()
  endif()
  if(NOT EXISTS "${_ddprun_zig_python}")
    message(FATAL_ERROR "no Python with the ziglang package: run scripts/setup-wheel-tools.sh, "
      "or set DDPRUN_ZIG_PYTHON to a python that has ziglang==0.17.1")
  endif()
  set(ENV{DDPRUN_ZIG_PYTHON} "${_ddprun_zig_python}")
endif()
# The dependencies: made once per machine (and key) by build-deps.sh, here when they are missing.
if(NOT EXISTS "${DDPRUN_WHEEL_DEPS}/.ddprun-deps-key")
  message(STATUS "ddprun wheel: building the dependencies into ${DDPRUN_WHEEL_DEPS} (minutes)")
  execute_process(COMMAND "${CMAKE_CURRENT_LIST_DIR}/../../packaging/wheel/build-deps.sh"
      "${DDPRUN_WHEEL_ARCH}" "${DDPRUN_WHEEL_DEPS}" "$ENV{DDPRUN_ZIG_PYTHON}"
    RESULT_VARIABLE _ddprun_deps_failed)
  if(NOT _ddprun_deps_failed EQUAL 0)
    message(FATAL_ERROR "packaging/wheel/build-deps.sh ${DDPRUN_WHEEL_ARCH} failed (above)")
  endif()
endif()
# The compilers: small scripts around `python -m ziglang`, made for this Python in one folder per
# build tree (try_compile projects reuse the first one's).
if(NOT DEFINED ENV{DDPRUN_ZIG_BIN})
  set(ENV{DDPRUN_ZIG_BIN} "${CMAKE_BINARY_DIR}/zig-bin")
  foreach(_ddprun_tool cc c++ ar ranlib)
    if(_ddprun_tool MATCHES "^c")
      set(_ddprun_args "${_ddprun_tool} -target ${DDPRUN_WHEEL_ARCH}-linux-gnu.2.28")
    else()
      set(_ddprun_args "${_ddprun_tool}")
    endif()
    file(WRITE "$ENV{DDPRUN_ZIG_BIN}/zig-${_ddprun_tool}"
      "#!/bin/sh\nexec '$ENV{DDPRUN_ZIG_PYTHON}' -m ziglang ${_ddprun_args} \"$@\"\n")
    file(CHMOD "$ENV{DDPRUN_ZIG_BIN}/zig-${_ddprun_tool}" PERMISSIONS OWNER_READ OWNER_WRITE
      OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endforeach()
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES DDPRUN_WHEEL_ARCH DDPRUN_WHEEL_DEPS)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ${DDPRUN_WHEEL_ARCH})
set(CMAKE_C_COMPILER "$ENV{DDPRUN_ZIG_BIN}/zig-cc")
set(CMAKE_CXX_COMPILER "$ENV{DDPRUN_ZIG_BIN}/zig-c++")
set(CMAKE_AR "$ENV{DDPRUN_ZIG_BIN}/zig-ar" CACHE FILEPATH "")
set(CMAKE_RANLIB "$ENV{DDPRUN_ZIG_BIN}/zig-ranlib" CACHE FILEPATH "")
# Only the prefix: nothing of this machine's /usr (its glibc is 2.36) may leak into the build.
set(CMAKE_FIND_ROOT_PATH "${DDPRUN_WHEEL_DEPS}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The programs made at build time (completion scripts) run here: natively for x86_64, under
# qemu-user for aarch64.
if(DDPRUN_WHEEL_ARCH STREQUAL "aarch64")
  # Debian's libc6-arm64-cross holds the aarch64 loader and glibc the programs start with.
  find_program(DDPRUN_QEMU_AARCH64 qemu-aarch64-static)
  set(_ddprun_arm64_root /usr/aarch64-linux-gnu)
  if(NOT DDPRUN_QEMU_AARCH64 OR NOT EXISTS "${_ddprun_arm64_root}/lib/ld-linux-aarch64.so.1")
    message(FATAL_ERROR "the aarch64 wheel's completion scripts are made by running its programs: "
      "install qemu-user-static and libc6-arm64-cross (scripts/install-deps.sh)")
  endif()
  set(CMAKE_CROSSCOMPILING_EMULATOR "${DDPRUN_QEMU_AARCH64};-L;${_ddprun_arm64_root}")
endif()
