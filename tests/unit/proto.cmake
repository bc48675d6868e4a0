# Helper protocol: the codec (proto/mh_msg.c) and rpcd's client (controller/mh_client.c).
sepcsi_unit_test(test_mh_msg
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mh_msg.c
  LIBS sepcsi_proto)
sepcsi_unit_test(test_mh_client
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mh_client.c
  LIBS sepcsi_mhclient Threads::Threads)

