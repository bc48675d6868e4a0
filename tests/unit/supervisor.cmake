# Unit tests of the supervisor's pure parts, its metrics file and the control channel codec.
sepcsi_unit_test(test_supctl SOURCES unit/test_supctl.c)
sepcsi_unit_test(test_sup_state SOURCES unit/test_sup_state.c LIBS sepcsi_sup_core)
sepcsi_unit_test(test_sup_config SOURCES unit/test_sup_config.c LIBS sepcsi_sup_core)
sepcsi_unit_test(test_sup_metrics SOURCES unit/test_sup_metrics.c LIBS sepcsi_sup_core
  sepcsi_sup_metrics_text)
target_compile_definitions(test_sup_metrics PRIVATE
  SEPCSI_METRICS_CHECK="$<TARGET_FILE:sepcsi-metrics-check>")
add_dependencies(test_sup_metrics sepcsi-metrics-check)
