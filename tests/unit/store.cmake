# store/: the sqlite store. The test also opens the database file directly with
# sqlite3 to check the schema version, journal mode and to plant bad files.
sepcsi_unit_test(test_store
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_store.c
  LIBS sepcsi_store PkgConfig::SQLITE Threads::Threads)
# Intents, transactions, and damaged store files refused at open (as found).
sepcsi_unit_test(test_store_crash
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_store_crash.c
  LIBS sepcsi_store PkgConfig::SQLITE Threads::Threads)
