cmake_minimum_required(VERSION 3.18)
# discover_tests.cmake - run after a test program is built (cmake -P): asks
# the program for its cases (`program --list`: one per line, "<case>" or
# "<case> serial") and writes the ctest script that adds one test per case,
# <prefix>_<case>, run as `program <case>` in its own process with a
# timeout. Variables: PROGRAM, PREFIX, TIMEOUT, LABEL, SERIAL (1: every case
# alone), WORKDIR, OUTPUT, EMULATOR (optional, e.g. qemu for a cross build),
# PG, PG_ONLY, PG_SKIP, PG_ONLY_CASES, PG_DIR (the PostgreSQL variants,
# tests/CMakeLists.txt).
execute_process(COMMAND ${EMULATOR} ${PROGRAM} --list
  OUTPUT_VARIABLE listed RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} --list failed (${rc}): ${err}")
endif()
string(REPLACE "\n" ";" lines "${listed}")
string(REPLACE "," ";" PG_SKIP "${PG_SKIP}")
string(REPLACE "," ";" PG_ONLY_CASES "${PG_ONLY_CASES}")
set(script "# generated from `${PROGRAM} --list`\n")
set(count 0)
foreach(line IN LISTS lines)
  string(STRIP "${line}" line)
  if(line STREQUAL "")
    continue()
  endif()
  separate_arguments(words UNIX_COMMAND "${line}")
  list(GET words 0 case)
  set(name ${PREFIX}_${case})
  set(props "TIMEOUT ${TIMEOUT} LABELS ${LABEL} WORKING_DIRECTORY \"${WORKDIR}\"")
  if(SERIAL OR "serial" IN_LIST words)
    string(APPEND props " RUN_SERIAL TRUE")
  endif()
  if(NOT PG_ONLY AND NOT case IN_LIST PG_ONLY_CASES)
    string(APPEND script "add_test(${name} ${EMULATOR} \"${PROGRAM}\" ${case})\n")
    string(APPEND script "set_tests_properties(${name} PROPERTIES ${props})\n")
  endif()
  # The PostgreSQL variant (perf_add_test_program PG): the same case with
  # the collector on the pg_server fixture's server.
  if(PG AND NOT case IN_LIST PG_SKIP)
    set(pg_name pg_${name})
    string(APPEND script "add_test(${pg_name} ${EMULATOR} \"${PROGRAM}\" ${case})\n")
    string(APPEND script "set_tests_properties(${pg_name} PROPERTIES ${props}"
      " FIXTURES_REQUIRED pg_server"
      " ENVIRONMENT \"PERF_TEST_DB=pg;PERF_TEST_PG_DIR=${PG_DIR}\")\n")
  endif()
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} --list named no case")
endif()
file(WRITE ${OUTPUT} "${script}")
