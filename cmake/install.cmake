# cmake/install.cmake - what `cmake --install` puts where (included by
# sdk/CMakeLists.txt once the libraries exist). Components: runtime (the
# shared libraries), dev (header, static library, CMake package, pkg-config
# files), collector and tools (their programs).
#
#   include/perf_sdk.h, perf_sdk_uv.h, perf_sdk_glib.h, perf_sdk_libevent.h
#   lib/libperfsdk.so.0 (the front apps link) and libperfsdk-core.so.0 (the
#     SDK it loads from its own directory: both always in one directory);
#     lib/ is lib/<multiarch> on Debian (the root CMakeLists.txt)
#   lib/libperfsdk.so (the link-time name), lib/libperfsdk.a
#   lib/cmake/PerfSDK/  find_package(PerfSDK): PerfSDK::perfsdk (shared),
#                       PerfSDK::perfsdk_static (static, with its dependencies)
#   lib/pkgconfig/perfsdk.pc (shared; --static adds Libs.private and
#                       Requires.private) and perfsdk-static.pc (libperfsdk.a)
include(CMakePackageConfigHelpers)

# perf_sdk.h and the header-only event-loop integrations (libuv, GLib,
# libevent: docs/integrations.md).
install(FILES ${PROJECT_SOURCE_DIR}/include/perf_sdk.h ${PROJECT_SOURCE_DIR}/include/perf_sdk_uv.h
  ${PROJECT_SOURCE_DIR}/include/perf_sdk_glib.h ${PROJECT_SOURCE_DIR}/include/perf_sdk_libevent.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(TARGETS perfsdk EXPORT PerfSDKTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
# The core is never linked by name: no libperfsdk-core.so link.
install(TARGETS perfsdk_core LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
  NAMELINK_SKIP)
install(TARGETS perfsdk_static EXPORT PerfSDKTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)

set(PERF_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/PerfSDK)
install(EXPORT PerfSDKTargets NAMESPACE PerfSDK:: DESTINATION ${PERF_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/PerfSDKConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/PerfSDKConfig.cmake INSTALL_DESTINATION ${PERF_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/PerfSDKConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/PerfSDKConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/PerfSDKConfigVersion.cmake DESTINATION ${PERF_CMAKE_DIR}
  COMPONENT dev)

# pkg-config: the prefix is found from the .pc file's own place, so an
# install under any --prefix (or DESTDIR) works as it is.
set(PERF_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH PERF_PC_TO_PREFIX /${PERF_PKGCONFIG_DIR} /)
string(REGEX REPLACE "/$" "" PERF_PC_TO_PREFIX "${PERF_PC_TO_PREFIX}")
foreach(pc perfsdk perfsdk-static)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc DESTINATION ${PERF_PKGCONFIG_DIR}
    COMPONENT dev)
endforeach()
