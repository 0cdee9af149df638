# CPACK_PROJECT_CONFIG_FILE: read by CPack once per generator. The .deb keeps its files unstripped
# for CPack to split the debug symbols into the -dbgsym package; the others are stripped. The
# archive unpacks to ddprun-<version>-Linux/{bin,lib,share,include}.
if(CPACK_GENERATOR STREQUAL "DEB")
  set(CPACK_STRIP_FILES OFF)
else()
  set(CPACK_STRIP_FILES ON)
endif()
if(CPACK_GENERATOR STREQUAL "TGZ")
  set(CPACK_PACKAGING_INSTALL_PREFIX "/")
endif()
