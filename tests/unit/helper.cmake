# sepcsi-mounthelper: a real-process test (root, loop devices, mkfs, mounts in a
# private mount namespace). Skipped (exit 77) when not run as root.
sepcsi_unit_test(test_helper_proc
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_helper_proc.c
  LIBS sepcsi_proto)
# The helper binary under test: compiled in, and argv[1] overrides it.
target_compile_definitions(test_helper_proc PRIVATE
  SEPCSI_MOUNTHELPER="$<TARGET_FILE:sepcsi-mounthelper>")
add_dependencies(test_helper_proc sepcsi-mounthelper)
set_tests_properties(test_helper_proc PROPERTIES
  SKIP_RETURN_CODE 77 TIMEOUT 300 RUN_SERIAL TRUE LABELS "unit;root")
