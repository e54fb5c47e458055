# The disk spool: finished batches on disk until the uploader delivers them
# (sdk/spool.c), its file I/O seam (sdk/spool_io.c) and the CRC-32C of its
# file header (sdk/crc32c.c). Included from the root CMakeLists.txt before
# the library is defined.
list(APPEND PERF_SDK_SOURCES
  sdk/crc32c.c
  sdk/spool_io.c
  sdk/spool.c
)
