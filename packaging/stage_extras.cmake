# Run by CPack (CPACK_INSTALL_SCRIPTS) while it stages a package, never by `cmake --install`:
# adds what a package carries beyond the install rules, the same in the .deb, .rpm and .tar.gz:
# /usr/share/doc/ddprun/{copyright,changelog.gz} (Debian policy 12.5 and 12.7; the changelog
# is in Debian's format; copyright holds the BSD-3-Clause licence in DEP-5 form) and the lintian
# overrides, each with its reason. Besides, the licence file LICENSE: the .rpm's %license
# (/usr/share/licenses/ddprun/LICENSE, Packaging.cmake) and the archive's top directory; not the
# .deb, where the copyright file holds it (lintian: extra-license-file).
# DEB/RPM stage with DESTDIR (prepended by file(INSTALL)) under the packaging prefix; the
# archive generator stages into CMAKE_INSTALL_PREFIX itself.
if("$ENV{DESTDIR}" STREQUAL "")
  set(prefix "${CMAKE_INSTALL_PREFIX}")
else()
  set(prefix "${CPACK_PACKAGING_INSTALL_PREFIX}")
endif()
set(source "${CPACK_DDPRUN_PACKAGING_DIR}")
set(work "${CPACK_TOPLEVEL_DIRECTORY}/ddprun-extras")
file(REMOVE_RECURSE "${work}")
file(MAKE_DIRECTORY "${work}")

# gzip -9n: no name or time stamp in the archive, so that builds are reproducible.
execute_process(COMMAND sh -c "gzip -9nc '${source}/debian/changelog' > '${work}/changelog.gz'"
  RESULT_VARIABLE gzip_result)
if(NOT gzip_result EQUAL 0)
  message(FATAL_ERROR "stage_extras: gzip of the changelog failed")
endif()
configure_file("${source}/debian/lintian-overrides" "${work}/ddprun" COPYONLY)

file(INSTALL DESTINATION "${prefix}/share/doc/ddprun" TYPE FILE
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
  FILES "${source}/debian/copyright" "${work}/changelog.gz")
file(INSTALL DESTINATION "${prefix}/share/lintian/overrides" TYPE FILE
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
  FILES "${work}/ddprun")

get_filename_component(license "${source}/../LICENSE" ABSOLUTE)
if(CPACK_GENERATOR STREQUAL "RPM")
  file(INSTALL DESTINATION "${prefix}/share/licenses/ddprun" TYPE FILE
    PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES "${license}")
elseif(CPACK_GENERATOR STREQUAL "TGZ")
  file(INSTALL DESTINATION "${prefix}" TYPE FILE
    PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES "${license}")
endif()
