# CPACK_PROJECT_CONFIG_FILE: read by CPack once per generator. The .deb and the .rpm keep their
# files unstripped for the -dbgsym and -debuginfo packages (CPack's objcopy and rpmbuild's
# find-debuginfo strip them; an .rpm without -debuginfo is stripped); the archive is stripped.
# The archive unpacks to ddprun-<version>-Linux/{bin,lib,share,include,LICENSE}.
if(CPACK_GENERATOR STREQUAL "DEB" OR
   (CPACK_GENERATOR STREQUAL "RPM" AND CPACK_RPM_DEBUGINFO_PACKAGE))
  set(CPACK_STRIP_FILES OFF)
else()
  set(CPACK_STRIP_FILES ON)
endif()
if(CPACK_GENERATOR STREQUAL "TGZ")
  set(CPACK_PACKAGING_INSTALL_PREFIX "/")
endif()
