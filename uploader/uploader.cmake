# The uploader: the upload thread, its retry policy and its libcurl
# transport (included by the top-level CMakeLists.txt).
list(APPEND PERF_SDK_SOURCES
  uploader/retry_policy.c
  uploader/curl_transport.c
  uploader/uploader.c
)
list(APPEND PERF_SDK_LIBS PkgConfig::LIBCURL)
list(APPEND PERF_SDK_INCLUDES ${PROJECT_SOURCE_DIR}/uploader)
