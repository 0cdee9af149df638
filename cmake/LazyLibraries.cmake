# Lazily loaded libraries (issue 39, "the launch is fast again"): OpenSSL and hwloc serve only
# --rdzv_backend=etcd with TLS, a store token and --numa-binding, yet as DT_NEEDED libraries every
# launch (and its session keeper) would map them (and libudev) and, with the hardened build's
# -z now, bind their ~4,900 symbol relocations before main: about half of the loader's symbol
# lookups and 1.8 MiB of resident memory. (prometheus-cpp stays linked: the program constructs
# its TextSerializer, whose vtable is data in the library, which no trampoline can stand for; it
# is small and initialises nothing until --health_port asks for it.)
#
# With DDPRUN_LAZY_LIBRARIES the `ddprun` executable does not link them. Each function of theirs
# that the program calls (the lists below) is a generated trampoline in the executable (hidden, so
# nothing else binds to it): `jmp *slot`, the slot first pointing at a stub that loads the
# library (dlopen of its soname), fills every slot of that library (dlsym) and goes on to the
# real function (launcher/lazy_libraries.cc). A launch that never calls them never loads them.
# A function missing from a list fails the executable's link ("undefined reference"): add it
# there. Only functions can be called this way (no data symbol is used today).
#
# Other programs and the tests link the libraries as usual: a static library names them with
# ddprun_link_lazily(), a link that the ddprun target (property DDPRUN_LAZY_LIBRARIES) leaves out.
# x86-64 only (the trampolines are assembly); off in the wheel (static libraries, nothing to
# load) and in the sanitizer and fuzz trees.
set(_ddprun_lazy_default OFF)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$" AND NOT DDPRUN_WHEEL AND NOT DDPRUN_SANITIZE
   AND NOT DDPRUN_TSAN AND NOT DDPRUN_FUZZ)
  set(_ddprun_lazy_default ON)
endif()
option(DDPRUN_LAZY_LIBRARIES
  "ddprun loads OpenSSL and hwloc on first use (x86-64)" ${_ddprun_lazy_default})

# ddprun_link_lazily(target library...): `target` links `library` privately, except into an
# executable that loads it lazily.
function(ddprun_link_lazily target)
  foreach(library IN LISTS ARGN)
    target_link_libraries(${target} PRIVATE
      "$<$<NOT:$<BOOL:$<TARGET_PROPERTY:DDPRUN_LAZY_LIBRARIES>>>:${library}>")
    target_include_directories(${target} SYSTEM PRIVATE
      $<TARGET_PROPERTY:${library},INTERFACE_INCLUDE_DIRECTORIES>)
    target_compile_definitions(${target} PRIVATE
      $<TARGET_PROPERTY:${library},INTERFACE_COMPILE_DEFINITIONS>)
  endforeach()
endfunction()

if(NOT DDPRUN_LAZY_LIBRARIES)
  return()
endif()

set(DDPRUN_LAZY_libssl_SYMBOLS
  SSL_CTX_check_private_key SSL_CTX_ctrl SSL_CTX_free SSL_CTX_get_default_passwd_cb_userdata
  SSL_CTX_get_ex_data SSL_CTX_get_verify_callback SSL_CTX_load_verify_locations SSL_CTX_new
  SSL_CTX_set_default_passwd_cb_userdata SSL_CTX_set_default_verify_paths SSL_CTX_set_ex_data
  SSL_CTX_set_options SSL_CTX_set_verify SSL_CTX_use_PrivateKey_file
  SSL_CTX_use_certificate_chain_file SSL_accept SSL_connect SSL_ctrl SSL_free SSL_get0_param
  SSL_get_error SSL_get_ex_data SSL_get_shutdown SSL_get_verify_result SSL_new SSL_read
  SSL_set1_host SSL_set_bio SSL_set_cert_cb SSL_set_ex_data SSL_write TLS_client_method)
set(DDPRUN_LAZY_libcrypto_SYMBOLS
  BIO_ctrl BIO_ctrl_pending BIO_free BIO_new_bio_pair BIO_read BIO_write CRYPTO_memcmp
  ERR_clear_error ERR_get_error ERR_reason_error_string EVP_sha256 HMAC OPENSSL_cleanse
  RAND_bytes X509_VERIFY_PARAM_set1_ip_asc X509_verify_cert_error_string)
set(DDPRUN_LAZY_libhwloc_SYMBOLS
  hwloc_bitmap_alloc hwloc_bitmap_and hwloc_bitmap_first hwloc_bitmap_free hwloc_bitmap_iszero
  hwloc_bitmap_next hwloc_get_nbobjs_by_depth hwloc_get_obj_by_depth hwloc_get_type_depth
  hwloc_topology_destroy hwloc_topology_init hwloc_topology_load hwloc_topology_set_synthetic
  hwloc_topology_set_xml)
# The soname of a shared library file (what dlopen must name, as DT_NEEDED would).
function(_ddprun_soname file out)
  execute_process(COMMAND ${CMAKE_OBJDUMP} -p ${file} OUTPUT_VARIABLE dump RESULT_VARIABLE result)
  string(REGEX MATCH "SONAME +([^\n ]+)" match "${dump}")
  if(NOT result EQUAL 0 OR NOT CMAKE_MATCH_1)
    message(FATAL_ERROR "DDPRUN_LAZY_LIBRARIES: no SONAME in ${file}")
  endif()
  set(${out} ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()

# Packages: what ddprun loads on first use is no DT_NEEDED entry, so neither dpkg-shlibdeps nor
# rpmbuild would find it; packaging/Packaging.cmake adds these to the dependencies: the Debian
# package that holds the soname (dpkg-query, where there is one) and RPM's soname capability.
set(DDPRUN_LAZY_DEB_DEPENDS "")
set(DDPRUN_LAZY_RPM_REQUIRES "")
function(_ddprun_package_of file soname)
  get_filename_component(dir ${file} DIRECTORY)
  find_program(DDPRUN_DPKG_QUERY dpkg-query)
  if(DDPRUN_DPKG_QUERY)
    execute_process(COMMAND ${DDPRUN_DPKG_QUERY} -S ${dir}/${soname}
      OUTPUT_VARIABLE owner RESULT_VARIABLE result ERROR_QUIET)
    string(REGEX MATCH "^([^:,]+)" package "${owner}")
    if(result EQUAL 0 AND package)
      execute_process(COMMAND ${DDPRUN_DPKG_QUERY} -W -f=${dollar}{Version} ${package}
        OUTPUT_VARIABLE version RESULT_VARIABLE result ERROR_QUIET)
      string(REGEX REPLACE "-[^-]*$" "" upstream "${version}")
      list(APPEND DDPRUN_LAZY_DEB_DEPENDS "${package} (>= ${upstream})")
      set(DDPRUN_LAZY_DEB_DEPENDS ${DDPRUN_LAZY_DEB_DEPENDS} PARENT_SCOPE)
    endif()
  endif()
  list(APPEND DDPRUN_LAZY_RPM_REQUIRES "${soname}()(64bit)")
  set(DDPRUN_LAZY_RPM_REQUIRES ${DDPRUN_LAZY_RPM_REQUIRES} PARENT_SCOPE)
endfunction()
set(dollar "$")

set(_ddprun_lazy_files libssl ${OPENSSL_SSL_LIBRARY} libcrypto ${OPENSSL_CRYPTO_LIBRARY}
  libhwloc ${pkgcfg_lib_HWLOC_hwloc})

# Generated: the trampolines and slots (.S), and the table the resolver reads (.inc).
set(_asm "/* Generated by cmake/LazyLibraries.cmake: lazy trampolines, x86-64. */\n")
string(APPEND _asm "#ifdef __CET__\n#define DDPRUN_ENDBR endbr64\n#else\n#define DDPRUN_ENDBR\n#endif\n")
string(APPEND _asm "  .text\n")
set(_stubs "")
set(_slots "")
set(_table "/* Generated by cmake/LazyLibraries.cmake: DDPRUN_LAZY_LIBRARY(soname) then its symbols. */\n")
set(_index 0)
while(_ddprun_lazy_files)
  list(POP_FRONT _ddprun_lazy_files _name _file)
  if(NOT _file OR NOT EXISTS "${_file}")
    message(FATAL_ERROR "DDPRUN_LAZY_LIBRARIES: no file for ${_name} ('${_file}')")
  endif()
  _ddprun_soname(${_file} _soname)
  list(APPEND DDPRUN_LAZY_SONAMES ${_soname})
  _ddprun_package_of(${_file} ${_soname})
  string(APPEND _table "DDPRUN_LAZY_LIBRARY(\"${_soname}\")\n")
  foreach(_symbol IN LISTS DDPRUN_LAZY_${_name}_SYMBOLS)
    string(APPEND _table "DDPRUN_LAZY_SYMBOL(\"${_symbol}\")\n")
    string(APPEND _asm "  .p2align 4\n  .globl ${_symbol}\n  .hidden ${_symbol}\n"
      "  .type ${_symbol}, @function\n${_symbol}:\n  DDPRUN_ENDBR\n"
      "  jmp *ddprun_lazy_slots+8*${_index}(%rip)\n  .size ${_symbol}, .-${_symbol}\n")
    string(APPEND _stubs ".Lddprun_lazy_stub_${_index}:\n  DDPRUN_ENDBR\n  pushq $${_index}\n"
      "  jmp .Lddprun_lazy_common\n")
    string(APPEND _slots "  .quad .Lddprun_lazy_stub_${_index}\n")
    math(EXPR _index "${_index} + 1")
  endforeach()
endwhile()
# The common stub: the caller's argument registers (and %al, the vector count of a variadic
# call) kept around DdprunLazyResolve(index), which returns the real function; then a tail jump
# to it, so the stack is as the caller left it. Stack: entry 8 mod 16, the pushed index makes it
# 0, seven pushes 8, 136 bytes for xmm0-7 0 again before the call.
string(APPEND _asm "  .p2align 4\n${_stubs}"
  ".Lddprun_lazy_common:\n"
  "  pushq %rdi\n  pushq %rsi\n  pushq %rdx\n  pushq %rcx\n  pushq %r8\n  pushq %r9\n  pushq %rax\n"
  "  subq $136, %rsp\n")
foreach(_x RANGE 7)
  math(EXPR _offset "${_x} * 16")
  string(APPEND _asm "  movdqu %xmm${_x}, ${_offset}(%rsp)\n")
endforeach()
string(APPEND _asm "  movq 192(%rsp), %rdi\n  call DdprunLazyResolve@PLT\n  movq %rax, %r11\n")
foreach(_x RANGE 7)
  math(EXPR _offset "${_x} * 16")
  string(APPEND _asm "  movdqu ${_offset}(%rsp), %xmm${_x}\n")
endforeach()
string(APPEND _asm "  addq $136, %rsp\n"
  "  popq %rax\n  popq %r9\n  popq %r8\n  popq %rcx\n  popq %rdx\n  popq %rsi\n  popq %rdi\n"
  "  addq $8, %rsp\n  jmp *%r11\n"
  "  .data\n  .p2align 3\n  .globl ddprun_lazy_slots\n  .hidden ddprun_lazy_slots\n"
  "ddprun_lazy_slots:\n${_slots}"
  "  .section .note.GNU-stack,\"\",@progbits\n")
set(DDPRUN_LAZY_TRAMPOLINES ${CMAKE_BINARY_DIR}/generated/lazy_trampolines.S)
set(DDPRUN_LAZY_TABLE_DIR ${CMAKE_BINARY_DIR}/generated)
file(GENERATE OUTPUT ${DDPRUN_LAZY_TRAMPOLINES} CONTENT "${_asm}")
file(GENERATE OUTPUT ${DDPRUN_LAZY_TABLE_DIR}/lazy_libraries.inc CONTENT "${_table}")
enable_language(ASM)
