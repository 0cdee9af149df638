# `make package` (CPack, from this tree's install rules): ddprun_<version>_<arch>.deb with
# ddprun-dbgsym_<version>_<arch>.ddeb (the debug symbols, split out with objcopy), the .rpm with
# ddprun-debuginfo-<version>-1.<arch>.rpm (debug symbols and sources; DDPRUN_PACKAGE_BUILD trees
# only: cmake/PackageBuild.cmake) and the .tar.gz, all installing under /usr (the archive:
# relative to where it is unpacked). Licence: BSD-3-Clause (LICENSE), in the Debian copyright
# file, the RPM's License tag and %license file, and the archive's top directory. What
# only packages carry (copyright, changelog, lintian overrides) comes from stage_extras.cmake;
# per-generator settings from project_config.cmake. tests/package/test_package.py installs the
# .deb and checks it, lintian included (make check-package).

# The changelog's top entry must name the version being packaged.
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/debian/changelog _ddprun_changelog_top LIMIT_COUNT 1)
if(NOT _ddprun_changelog_top MATCHES "^ddprun \\(${PROJECT_VERSION}\\) ")
  message(FATAL_ERROR "packaging/debian/changelog starts with '${_ddprun_changelog_top}', "
    "not version ${PROJECT_VERSION}: add an entry for it")
endif()

set(CPACK_PACKAGE_NAME ddprun)
set(CPACK_PACKAGE_VENDOR "ddprun maintainers")
set(CPACK_PACKAGE_CONTACT "ddprun maintainers <maintainers@users.noreply.a-seed-f94a82af.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "native drop-in replacement for PyTorch's torchrun")
set(CPACK_PACKAGE_DESCRIPTION [=[ddprun launches distributed PyTorch training jobs with torchrun's command line,
worker environment, log layout and failure report, without a Python runtime in
the launcher. Its rendezvous store speaks the c10d TCPStore protocol, so that
unchanged training scripts run under it, on one node or many, statically or
elastically (nodes may leave and join; the store moves when its host is lost).

This package contains ddprun, the ddprun-store server and client, the
ddprun-allreduce-check and ddprun-allreduce-perf test programs, their manual
pages and bash, zsh and fish completion, and libddprun_worker for C++ trainers
(its headers, a CMake package and a pkg-config file).]=])
set(CPACK_GENERATOR "DEB;RPM;TGZ")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_SCRIPTS ${CMAKE_CURRENT_LIST_DIR}/stage_extras.cmake)
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_CURRENT_LIST_DIR}/project_config.cmake)
set(CPACK_DDPRUN_PACKAGING_DIR ${CMAKE_CURRENT_LIST_DIR})

# Debian: dependencies from dpkg-shlibdeps, a shlibs file for libddprun_worker.so.0, debug
# symbols in a -dbgsym package.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# What ddprun loads on first use (cmake/LazyLibraries.cmake) is no DT_NEEDED entry for
# dpkg-shlibdeps or rpmbuild to find: named here (rpmbuild's requirements below).
if(DDPRUN_LAZY_DEB_DEPENDS)
  list(REMOVE_DUPLICATES DDPRUN_LAZY_DEB_DEPENDS)
  string(REPLACE ";" ", " CPACK_DEBIAN_PACKAGE_DEPENDS "${DDPRUN_LAZY_DEB_DEPENDS}")
endif()
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-torch")
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_LIST_DIR}/debian/triggers)  # ldconfig
# gzip: xz takes a minute more on two cores, mostly on the -dbgsym package's 50 MB of debug
# symbols (cpack -D CPACK_DEBIAN_COMPRESSION_TYPE=xz for a smaller .deb).
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)

# RPM: requirements found by rpmbuild; directories other packages own are not claimed.
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
set(CPACK_RPM_PACKAGE_RELEASE 1)
set(CPACK_RPM_PACKAGE_LICENSE "BSD-3-Clause")  # SPDX, as Fedora and openSUSE spell it
set(CPACK_RPM_PACKAGE_GROUP "Development/Tools")
if(DDPRUN_LAZY_RPM_REQUIRES)
  string(REPLACE ";" ", " CPACK_RPM_PACKAGE_REQUIRES "${DDPRUN_LAZY_RPM_REQUIRES}")
endif()
# No /usr/lib/.build-id links: the .rpm holds the same files as the .deb, plus the licence
# (stage_extras.cmake) as %license.
set(CPACK_RPM_SPEC_MORE_DEFINE "%define _build_id_links none")
set(CPACK_RPM_USER_FILELIST "%license /usr/share/licenses/ddprun/LICENSE")
# -debuginfo: rpmbuild's find-debuginfo splits the symbols out of the unstripped programs and
# library (project_config.cmake strips nothing), CPack copies the sources their debug information
# names under DDPRUN_DEBUG_SOURCE_ROOT to /usr/src/debug/ddprun/src_0 (debugedit rewrites the
# paths in place: the prefix must not be longer than the link's path).
if(DDPRUN_PACKAGE_BUILD)
  set(CPACK_RPM_DEBUGINFO_PACKAGE ON)
  # Debian installs shared libraries 0644; find-debuginfo only splits executable files (and RPM
  # distributions ship libraries 0755).
  set(CPACK_RPM_INSTALL_WITH_EXEC ON)
  set(CPACK_RPM_DEBUGINFO_FILE_NAME RPM-DEFAULT)
  set(CPACK_BUILD_SOURCE_DIRS "${DDPRUN_DEBUG_SOURCE_ROOT}")
  set(CPACK_RPM_BUILD_SOURCE_DIRS_PREFIX /usr/src/debug/ddprun)
  string(LENGTH "${DDPRUN_DEBUG_SOURCE_ROOT}" _ddprun_root_length)
  if(_ddprun_root_length LESS 27)  # /usr/src/debug/ddprun/src_0
    message(FATAL_ERROR "${DDPRUN_DEBUG_SOURCE_ROOT} is shorter than "
      "/usr/src/debug/ddprun/src_0: the RPM -debuginfo cannot rewrite its paths; build deeper")
  endif()
endif()
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION
  /usr/share/licenses
  /usr/share/bash-completion /usr/share/bash-completion/completions
  /usr/share/fish /usr/share/fish/vendor_completions.d
  /usr/share/zsh /usr/share/zsh/vendor-completions
  /usr/share/lintian /usr/share/lintian/overrides
  /usr/${CMAKE_INSTALL_LIBDIR} /usr/${CMAKE_INSTALL_LIBDIR}/cmake
  /usr/${CMAKE_INSTALL_LIBDIR}/pkgconfig)

include(CPack)
