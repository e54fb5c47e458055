# proto/pprof.cmake - the pprof Profile schema (proto/pprof/profile.proto)
# compiled with protoc-c at build time, the same way wire.cmake compiles
# perf.proto, into ${PERF_PROTO_GEN_DIR}/pprof/profile.pb-c.{c,h}; nothing
# generated is checked in. Included from collector/CMakeLists.txt: the
# collector's pprof export writes it, the tests read it back (link
# pprof_proto and include "pprof/profile.pb-c.h").

set(PERF_PPROF_GEN_C ${PERF_PROTO_GEN_DIR}/pprof/profile.pb-c.c)
set(PERF_PPROF_GEN_H ${PERF_PROTO_GEN_DIR}/pprof/profile.pb-c.h)

add_custom_command(
  OUTPUT ${PERF_PPROF_GEN_C} ${PERF_PPROF_GEN_H}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PERF_PROTO_GEN_DIR}
  COMMAND ${PROTOC_C} --c_out=${PERF_PROTO_GEN_DIR} -I ${PERF_PROTO_DIR}
          ${PERF_PROTO_DIR}/pprof/profile.proto
  DEPENDS ${PERF_PROTO_DIR}/pprof/profile.proto
  COMMENT "protoc-c: pprof/profile.proto"
  VERBATIM)

add_library(pprof_proto STATIC ${PERF_PPROF_GEN_C})
target_include_directories(pprof_proto PUBLIC ${PERF_PROTO_GEN_DIR})
target_link_libraries(pprof_proto PUBLIC PkgConfig::PROTOBUF_C)
