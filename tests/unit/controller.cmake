sepcsi_unit_test(test_controller
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_controller.c
  LIBS sepcsi_controller)
