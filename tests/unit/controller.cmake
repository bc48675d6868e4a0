sepcsi_unit_test(test_controller
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_controller.c
  LIBS sepcsi_controller)
# The Controller and GroupController services beyond the skeleton, with a fake
# helper that keeps a table of images.
sepcsi_unit_test(test_controller_cs
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_controller_cs.c
  LIBS sepcsi_controller)
# A directory volume's name from pathPattern and the PVC/PV metadata (pure).
sepcsi_unit_test(test_ctl_dirname
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_ctl_dirname.c
  LIBS sepcsi_controller)
