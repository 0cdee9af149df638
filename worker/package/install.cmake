# Installs libddprun_worker.so for C++ trainers: the library, its public headers under
# <includedir>/ddprun (so that both <ddprun/worker/program.h> and the headers' own
# "worker/backend.h" includes resolve), a CMake package (find_package(ddprun) ->
# ddprun::worker) and a pkg-config file (pkg-config ddprun). examples/cpp/ builds against them.
include(CMakePackageConfigHelpers)

set(DDPRUN_PUBLIC_HEADERS
  common/cancellable_pause.h common/clock.h common/errors.h common/host_port.h common/version.h
  store/store.h store/store_auth.h store/store_protocol.h
  store/tcp_store_client.h
  worker/backend.h worker/communicator.h worker/data_type.h worker/program.h worker/pulse.h
  worker/worker_env.h worker/worker_store.h)
foreach(header ${DDPRUN_PUBLIC_HEADERS})
  get_filename_component(header_dir ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${header}
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ddprun/${header_dir})
endforeach()

set(DDPRUN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ddprun)
install(TARGETS ddprun_worker_shared EXPORT ddprunTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT ddprunTargets NAMESPACE ddprun:: DESTINATION ${DDPRUN_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ddprunConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ddprunConfig.cmake INSTALL_DESTINATION ${DDPRUN_CMAKE_DIR})
# 0.x: a minor version may change the library's interface.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ddprunConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ddprunConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/ddprunConfigVersion.cmake DESTINATION ${DDPRUN_CMAKE_DIR})

# The .pc file finds the prefix from its own place (pkg-config's ${pcfiledir}), so that the
# same file is right in a package (/usr), a tarball or a `cmake --install --prefix` tree.
file(RELATIVE_PATH DDPRUN_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" DDPRUN_PC_TO_PREFIX "${DDPRUN_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/ddprun.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ddprun.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ddprun.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
