# policy/: the policy file and queries (test_policy), the seccomp filters and
# the capability confinement (test_seccomp, a syscall probe in the style of
# bubblewrap's tests/try-syscall.c: each probe runs in its own child).
sepcsi_unit_test(test_policy
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_policy.c
  LIBS sepcsi_policy_file)

# A tiny program the seccomp test execs under the helper's confinement to show
# what an exec'd tool really gets. Built without sanitizers: their runtime
# would need system calls the helper's filter (rightly) refuses.
add_executable(helper_capdump ${CMAKE_CURRENT_LIST_DIR}/helper_capdump.c)
sepcsi_target_warnings(helper_capdump)
target_compile_options(helper_capdump PRIVATE -fno-sanitize=all)
target_link_options(helper_capdump PRIVATE -fno-sanitize=all)

sepcsi_unit_test(test_seccomp
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_seccomp.c
  LIBS sepcsi_seccomp_helper sepcsi_seccomp_tools sepcsi_seccomp_tree sepcsi_seccomp_rpcd
  sepcsi_seccomp_metrics sepcsi_policy)
target_compile_definitions(test_seccomp PRIVATE
  SEPCSI_CAPDUMP="$<TARGET_FILE:helper_capdump>")
add_dependencies(test_seccomp helper_capdump)

# The example policy cmake --install ships is the built-in defaults, exactly.
sepcsi_unit_test(test_policy_example
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_policy_example.c
  LIBS sepcsi_policy_file)
target_compile_definitions(test_policy_example PRIVATE
  SEPCSI_POLICY_EXAMPLE="${PROJECT_SOURCE_DIR}/policy/policy.example.ini")
