# proto/wire.cmake - the wire schema and the batch encoder, included from the
# top-level CMakeLists.txt before the library is defined.
#
# protoc-c generates perf/v1/perf.pb-c.{c,h} from proto/perf/v1/perf.proto at
# build time into ${CMAKE_BINARY_DIR}/proto; nothing generated is checked in.
# Code that includes sdk/encoder.h needs ${PERF_PROTO_GEN_DIR} on its include
# path (the tests and the benchmark add it).

set(PERF_PROTO_DIR ${CMAKE_CURRENT_LIST_DIR})
set(PERF_PROTO_GEN_DIR ${CMAKE_BINARY_DIR}/proto)
set(PERF_PROTO_GEN_C ${PERF_PROTO_GEN_DIR}/perf/v1/perf.pb-c.c)
set(PERF_PROTO_GEN_H ${PERF_PROTO_GEN_DIR}/perf/v1/perf.pb-c.h)

add_custom_command(
  OUTPUT ${PERF_PROTO_GEN_C} ${PERF_PROTO_GEN_H}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PERF_PROTO_GEN_DIR}
  COMMAND ${PROTOC_C} --c_out=${PERF_PROTO_GEN_DIR} -I ${PERF_PROTO_DIR}
          ${PERF_PROTO_DIR}/perf/v1/perf.proto
  DEPENDS ${PERF_PROTO_DIR}/perf/v1/perf.proto
  COMMENT "protoc-c: perf/v1/perf.proto"
  VERBATIM)

list(APPEND PERF_SDK_SOURCES ${PERF_PROTO_GEN_C} sdk/encoder.c)
list(APPEND PERF_SDK_LIBS PkgConfig::PROTOBUF_C PkgConfig::ZSTD)
list(APPEND PERF_SDK_INCLUDES ${PERF_PROTO_GEN_DIR})
