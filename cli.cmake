# The slurm-triage executable: a dispatcher plus every component's subcommands (OBJECT libraries
# named triage_*_cli). Included from the top level after all components are defined.
add_executable(slurm-triage analyzer/cli/main.cpp)
target_link_libraries(slurm-triage PRIVATE triage::common triage_analyzer_cli triage_collector_cli
                      triage_agent_cli triage_tsdb_cli)
triage_target(slurm-triage)
install(TARGETS slurm-triage RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
