# The portable wheel's dependencies (docs/packaging.md) as the targets the folders link:
# header-only Boost, CLI11, nlohmann-json, spdlog and fmt from Debian's -dev packages (their
# folders only, never /usr/include itself, whose glibc headers are 2.36's), and the static
# libraries build-deps.sh made in DDPRUN_WHEEL_DEPS (OpenSSL, hwloc; prometheus-cpp and gloo are
# found by their own CMake packages there).
set(DDPRUN_WHEEL_HEADERS "${CMAKE_BINARY_DIR}/wheel-headers")
file(MAKE_DIRECTORY "${DDPRUN_WHEEL_HEADERS}")
foreach(folder boost CLI nlohmann spdlog fmt)
  if(NOT EXISTS "/usr/include/${folder}")
    message(FATAL_ERROR "/usr/include/${folder} is missing: run scripts/install-deps.sh")
  endif()
  file(CREATE_LINK "/usr/include/${folder}" "${DDPRUN_WHEEL_HEADERS}/${folder}" SYMBOLIC)
endforeach()

function(ddprun_header_target name)
  add_library(${name} INTERFACE IMPORTED GLOBAL)
  set_target_properties(${name} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${DDPRUN_WHEEL_HEADERS}"
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${DDPRUN_WHEEL_HEADERS}")
endfunction()
ddprun_header_target(Boost::headers)
# libc++ dropped std::unary_function (C++17) and std::result_of (C++20); Boost 1.74 names the
# first unless told, and Asio 1.74 the second in any case: libc++'s own switch brings it back.
set_property(TARGET Boost::headers PROPERTY INTERFACE_COMPILE_DEFINITIONS BOOST_NO_CXX98_FUNCTION_BASE)
add_compile_definitions(_LIBCPP_ENABLE_CXX20_REMOVED_TYPE_TRAITS _LIBCPP_DISABLE_DEPRECATION_WARNINGS)
ddprun_header_target(CLI11::CLI11)
ddprun_header_target(nlohmann_json::nlohmann_json)
ddprun_header_target(spdlog::spdlog)
set_property(TARGET spdlog::spdlog PROPERTY INTERFACE_COMPILE_DEFINITIONS
  SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY)
set(Boost_INCLUDE_DIRS "${DDPRUN_WHEEL_HEADERS}")

set(OPENSSL_USE_STATIC_LIBS TRUE)
set(OPENSSL_ROOT_DIR "${DDPRUN_WHEEL_DEPS}")
find_package(OpenSSL 3 REQUIRED)
add_library(PkgConfig::HWLOC STATIC IMPORTED GLOBAL)
set_target_properties(PkgConfig::HWLOC PROPERTIES
  IMPORTED_LOCATION "${DDPRUN_WHEEL_DEPS}/lib/libhwloc.a"
  INTERFACE_INCLUDE_DIRECTORIES "${DDPRUN_WHEEL_DEPS}/include")
find_package(Threads REQUIRED)

# No debug information in the wheel: zig adds -g by default (and its libc++ carries some), and the
# cross build has no strip of its own for scikit-build-core's install --strip.
add_compile_options(-g0)
add_link_options(LINKER:--strip-all)
