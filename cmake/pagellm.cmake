# pagellm_cc_test(NAME name SRCS a.cc ... DEPS lib ... [LABELS l ...])
# Registers one GoogleTest binary with CTest. Tests run from the repository root so that
# paths such as models/ and tests/data/ resolve the same way as from the README.
function(pagellm_cc_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS;ARGS" ${ARGN})
  add_executable(${T_NAME} ${T_SRCS})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT})
  if(T_LABELS)
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()

# pagellm_fixture(NAME fixture_test FOR test SCRIPT tools/fixtures/x.py [ARGS a ...])
# Registers a CTest set-up step that regenerates a test's reference data with a committed
# script run by the project's .venv Python (the independent reference implementations live
# there). Without .venv it only says so, and the test skips.
function(pagellm_fixture)
  cmake_parse_arguments(F "" "NAME;FOR;SCRIPT" "ARGS" ${ARGN})
  string(JOIN " " args ${F_ARGS})
  add_test(NAME ${F_NAME}
    COMMAND sh -c "if [ -x .venv/bin/python ]; then exec .venv/bin/python ${F_SCRIPT} ${args}; \
else echo 'no .venv (run tools/setup.sh): ${F_FOR} will skip'; fi"
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${F_NAME} PROPERTIES FIXTURES_SETUP ${F_NAME} TIMEOUT 900 LABELS fixture)
  set_tests_properties(${F_FOR} PROPERTIES FIXTURES_REQUIRED ${F_NAME})
endfunction()
