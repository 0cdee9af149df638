# DDPRUN_PACKAGE_BUILD=ON marks the tree that `make package` packages (the Makefile configures
# build/ so; the sanitizer and fuzz trees leave it off). Two things change in it:
#
# 1. Every target is compiled and linked with Debian's flags from dpkg-buildflags with
#    DEB_BUILD_MAINT_OPTIONS=hardening=+all, as a Debian package build would be: CPPFLAGS and
#    CXXFLAGS on the compiler (-D_FORTIFY_SOURCE=2, -fstack-protector-strong,
#    -Werror=format-security), LDFLAGS on every link (-z relro -z now); Debian's gcc builds PIE
#    by default. `make check-package` checks the result with hardening-check and lintian
#    (tests/package/test_package.py), whatever the flags here say.
#    reproducible=-fixfilepath,-fixdebugpath: dpkg's -ffile-prefix-map=<this checkout>=. (or
#    -fdebug-prefix-map) would make the debug information's paths relative, which the RPM
#    -debuginfo package cannot rewrite (2.).
#
# 2. The debug information names the sources under DDPRUN_DEBUG_SOURCE_ROOT, a link to the
#    source tree in the build tree (-fdebug-prefix-map), and CPack's RPM -debuginfo package
#    rewrites that prefix to /usr/src/debug/ddprun/src_0 (packaging/Packaging.cmake). debugedit
#    rewrites in place, so the old prefix must be at least as long as the new one: a checkout
#    at /work/main (10 characters) is too short by itself, <build>/debuginfo-sources is not.
#    gdb on the build tree's programs follows the link to the sources.
option(DDPRUN_PACKAGE_BUILD
  "The packaged tree: dpkg-buildflags' hardened flags, debug paths for the RPM -debuginfo" OFF)
if(NOT DDPRUN_PACKAGE_BUILD)
  return()
endif()
find_program(DDPRUN_DPKG_BUILDFLAGS dpkg-buildflags)
if(NOT DDPRUN_DPKG_BUILDFLAGS)
  message(FATAL_ERROR "DDPRUN_PACKAGE_BUILD=ON needs dpkg-buildflags (apt-get install dpkg-dev)")
endif()

set(_ddprun_deb_maint_options "hardening=+all reproducible=-fixfilepath,-fixdebugpath")
foreach(_ddprun_kind CPPFLAGS CXXFLAGS LDFLAGS)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env "DEB_BUILD_MAINT_OPTIONS=${_ddprun_deb_maint_options}"
            ${DDPRUN_DPKG_BUILDFLAGS} --get ${_ddprun_kind}
    OUTPUT_VARIABLE _ddprun_deb_${_ddprun_kind} OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _ddprun_result)
  if(NOT _ddprun_result EQUAL 0)
    message(FATAL_ERROR "dpkg-buildflags --get ${_ddprun_kind} failed (${_ddprun_result})")
  endif()
endforeach()
string(APPEND CMAKE_CXX_FLAGS " ${_ddprun_deb_CPPFLAGS} ${_ddprun_deb_CXXFLAGS}")
foreach(_ddprun_link EXE SHARED MODULE)
  string(APPEND CMAKE_${_ddprun_link}_LINKER_FLAGS " ${_ddprun_deb_LDFLAGS}")
endforeach()
message(STATUS "dpkg-buildflags (${_ddprun_deb_maint_options}): CPPFLAGS ${_ddprun_deb_CPPFLAGS}; "
  "CXXFLAGS ${_ddprun_deb_CXXFLAGS}; LDFLAGS ${_ddprun_deb_LDFLAGS}")

set(DDPRUN_DEBUG_SOURCE_ROOT "${CMAKE_BINARY_DIR}/debuginfo-sources")
file(CREATE_LINK "${CMAKE_SOURCE_DIR}" "${DDPRUN_DEBUG_SOURCE_ROOT}" SYMBOLIC)
add_compile_options("-fdebug-prefix-map=${CMAKE_SOURCE_DIR}=${DDPRUN_DEBUG_SOURCE_ROOT}")
