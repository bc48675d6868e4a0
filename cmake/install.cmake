# What `cmake --install BUILD [--prefix DIR]` puts where (GNUInstallDirs):
#   sbin/sepcsi-supervisor                         the one command an operator runs
#   bin/sepcsictl, bin/sepcsi-bench                tools for anyone (no privilege of their own)
#   libexec/sepcsi/sepcsi-rpcd, -mounthelper, -core, -runner
#                                                  run only by the supervisor and the helper,
#                                                  never by hand: out of PATH
#   share/man/man{1,5,8}/                          a page for every command and the policy file
#   share/doc/sepcsi/*.md, examples/policy.ini     the docs and the default policy
# The supervisor finds its children in ../libexec/sepcsi from its own directory
# (supervisor/sup_prep.c), so any prefix works as long as sbin and libexec keep
# their usual places beneath it; the helper finds its runners beside itself.
# Test programs, fuzzers and sepcsi-privtables (the docs' tables) are not installed.
include(GNUInstallDirs)

# The supervisor refuses children whose directory is group- or world-writable,
# so the directories made here are 0755 whatever the installer's umask is.
set(CMAKE_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

install(TARGETS sepcsi-supervisor RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
install(TARGETS sepcsictl sepcsi-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS sepcsi-rpcd sepcsi-mounthelper sepcsi-core sepcsi-runner sepcsi-tree-runner
                sepcsi-privileges
        RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/sepcsi)
# Execute-only for its owner too, as built (mounthelper/CMakeLists.txt says why).
install(TARGETS sepcsi-reader RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/sepcsi
        PERMISSIONS OWNER_EXECUTE GROUP_EXECUTE WORLD_EXECUTE)
# Execute-only, as built (supervisor/CMakeLists.txt says why).
install(TARGETS sepcsi-metrics-check RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/sepcsi
        PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_EXECUTE WORLD_EXECUTE)

install(FILES docs/sepcsictl.1 docs/sepcsi-bench.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES docs/sepcsi-policy.5 DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)
install(FILES docs/sepcsi-supervisor.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)

# The default policy as a file to start from. Documentation, not configuration,
# so it goes to the docs' examples/ (where Debian keeps a package's examples),
# not to ${CMAKE_INSTALL_SYSCONFDIR}: the driver needs no policy file (the same
# policy is built in), and a file under etc/ would look like configuration in
# use, be left behind by package managers as a conffile, and go stale beside a
# newer build's defaults. An operator copies it to /etc/sepcsi/policy.ini,
# edits it and passes --policy. tests/unit/test_policy_example.c checks that it
# loads to exactly the built-in defaults.
install(FILES policy/policy.example.ini DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
        RENAME policy.ini)

# Every Markdown page of docs/, read at install time so that a new page needs no edit here.
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")
