# Helper protocol: the codec (proto/mh_msg.c) and rpcd's client (controller/mh_client.c).
sepcsi_unit_test(test_mh_msg
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mh_msg.c
  LIBS sepcsi_proto)
sepcsi_unit_test(test_mh_client
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mh_client.c
  LIBS sepcsi_mhclient Threads::Threads)

# libFuzzer target for the codec decoder. The codec source is compiled into the
# target itself so that it carries the fuzzer's coverage instrumentation.
if(SEPCSI_FUZZ)
  if(CMAKE_C_COMPILER_ID MATCHES "Clang")
    set(FUZZ_FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
    add_executable(fuzz_mh_msg
      ${CMAKE_CURRENT_LIST_DIR}/../fuzz/fuzz_mh_msg.c
      ${PROJECT_SOURCE_DIR}/proto/mh_msg.c)
    target_include_directories(fuzz_mh_msg PRIVATE ${PROJECT_SOURCE_DIR}/proto)
    target_compile_options(fuzz_mh_msg PRIVATE ${FUZZ_FLAGS})
    target_link_options(fuzz_mh_msg PRIVATE ${FUZZ_FLAGS})
    sepcsi_target_warnings(fuzz_mh_msg)
    # A short smoke run under CTest; long runs are done by hand or in CI.
    add_test(NAME fuzz_mh_msg_smoke COMMAND fuzz_mh_msg -runs=200000 -seed=1)
    set_tests_properties(fuzz_mh_msg_smoke PROPERTIES TIMEOUT 120 LABELS fuzz)
  else()
    message(WARNING "SEPCSI_FUZZ needs clang (CC=clang): fuzz_mh_msg not built")
  endif()
endif()
