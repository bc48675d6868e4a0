# sepcsi-mounthelper: real-process tests (root, loop devices, mkfs, mounts in a
# private mount namespace). Skipped (exit 77) when not run as root.
#   test_helper_proc   lifecycle, refusals, confinement, violations, supervision
#   test_helper_ops    protocol v2: resize, snapshot, clone, capacity, concurrency,
#                      SIGTERM, audit file
#   test_helper_block  protocol v2: raw block, expand, stats, mount group,
#                      ephemeral directories, mkfs options
# All share helper_harness.c. The helper binary under test: compiled in, and
# argv[1] overrides it.
foreach(t test_helper_proc test_helper_ops test_helper_block)
  sepcsi_unit_test(${t}
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/${t}.c ${CMAKE_CURRENT_LIST_DIR}/helper_harness.c
    LIBS sepcsi_proto)
  target_compile_definitions(${t} PRIVATE
    SEPCSI_MOUNTHELPER="$<TARGET_FILE:sepcsi-mounthelper>")
  add_dependencies(${t} sepcsi-mounthelper)
  set_tests_properties(${t} PROPERTIES
    SKIP_RETURN_CODE 77 TIMEOUT 300 RUN_SERIAL TRUE LABELS "unit;root")
endforeach()

# quota_emu: a command run with its quotactl_fd(2) calls answered from a table
# (seccomp user notification), for the e2e tests of project quotas on kernels
# without them (tests/e2e/test_isolation.py).
add_executable(quota_emu ${CMAKE_CURRENT_LIST_DIR}/quota_emu.c)
sepcsi_target_warnings(quota_emu)

# sepcsi-reader's Landlock ruleset, applied in a child: reading only, and only
# where it looks. Skipped (77) on a kernel without Landlock.
sepcsi_unit_test(test_reader_landlock
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reader_landlock.c
          ${PROJECT_SOURCE_DIR}/mounthelper/reader/reader_landlock.c)
target_include_directories(test_reader_landlock PRIVATE ${PROJECT_SOURCE_DIR}/mounthelper/reader)
set_tests_properties(test_reader_landlock PROPERTIES SKIP_RETURN_CODE 77)

# openat2_retry without openat2 (sepcsi-reader's filter answers it ENOSYS): one
# name opened as openat2 would, the rest ENOSYS.
sepcsi_unit_test(test_openat2
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_openat2.c
          ${PROJECT_SOURCE_DIR}/mounthelper/reader/reader_openat2.c
  LIBS PkgConfig::SECCOMP)
target_include_directories(test_openat2 PRIVATE ${PROJECT_SOURCE_DIR}/mounthelper/reader)
