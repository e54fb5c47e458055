# cmake/packaging.cmake - Debian packages with CPack (included from the root
# CMakeLists.txt after every target exists). One package per install
# component (cmake/install.cmake):
#
#   runtime   -> libperfsdk0      libperfsdk.so.0*, libperfsdk-core.so.0*, perfsdk/perf-upload
#   dev       -> libperfsdk-dev   header, libperfsdk.so, libperfsdk.a, CMake
#                                 package, .pc files
#   collector -> perf-collector   the binary, its systemd unit, config in
#                                 /etc/perf-collector, user perf-collector
#   tools     -> perf-tools       perf-dump, perf-symbols, perf-run
#
# Build them from a release build: cd build && cpack -G DEB. The packages
# install under /usr whatever the build's prefix (CPACK_INSTALL_PREFIX), the
# libraries in lib/<multiarch> (the root CMakeLists.txt puts them there
# under any prefix on Debian); the files only a package has (unit, conf, copyright, changelog) are
# EXCLUDE_FROM_ALL: a plain `cmake --install` does not write them;
# `cmake --install --component collector --prefix P` puts the conf and the
# unit under P (P/etc/perf-collector, P/lib/systemd/system), the package
# (prefix /usr) in /etc/perf-collector and /lib/systemd/system
# (cmake/install_collector_system_files.cmake.in). Maintainer scripts and
# the unit: packaging/debian/.
set(PERF_DEB_DIR ${PROJECT_SOURCE_DIR}/packaging/debian)
set(PERF_DEB_VERSION ${PROJECT_VERSION})
set(PERF_DEB_MAINTAINER
  "perfsdk maintainers <maintainers@users.noreply.a-seed-710f3372.example>")

# copyright and changelog.gz (native package: no Debian revision) in each
# package's /usr/share/doc/<package>/.
set(CPACK_DEBIAN_PACKAGE_VERSION ${PERF_DEB_VERSION})
configure_file(${PERF_DEB_DIR}/changelog ${CMAKE_BINARY_DIR}/packaging/changelog @ONLY)
execute_process(COMMAND gzip -9nf ${CMAKE_BINARY_DIR}/packaging/changelog
  RESULT_VARIABLE gzip_status)
if(NOT gzip_status EQUAL 0)
  message(FATAL_ERROR "packaging: gzip of the changelog failed")
endif()
set(PERF_DEB_PACKAGES runtime:libperfsdk0 dev:libperfsdk-dev collector:perf-collector
  tools:perf-tools)
foreach(pair ${PERF_DEB_PACKAGES})
  string(REPLACE ":" ";" pair ${pair})
  list(GET pair 0 component)
  list(GET pair 1 package)
  string(TOUPPER ${component} COMPONENT)
  set(CPACK_DEBIAN_${COMPONENT}_PACKAGE_NAME ${package})
  install(FILES ${PERF_DEB_DIR}/copyright ${CMAKE_BINARY_DIR}/packaging/changelog.gz
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package} COMPONENT ${component}
    EXCLUDE_FROM_ALL)
endforeach()

# The lintian tags accepted, with the reasons (packaging/debian/README.md).
foreach(package libperfsdk0 perf-collector perf-tools)
  set(component runtime)
  if(package STREQUAL "perf-collector")
    set(component collector)
  elseif(package STREQUAL "perf-tools")
    set(component tools)
  endif()
  install(FILES ${PERF_DEB_DIR}/${package}/lintian-overrides
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME ${package}
    COMPONENT ${component} EXCLUDE_FROM_ALL)
endforeach()

# perf-collector's conf file and unit: where depends on the prefix of the
# install itself (/usr, the package's: /etc and /lib/systemd/system; any
# other: under it), so the rule runs at install time.
configure_file(${PROJECT_SOURCE_DIR}/cmake/install_collector_system_files.cmake.in
  ${CMAKE_BINARY_DIR}/packaging/install_collector_system_files.cmake @ONLY)
install(SCRIPT ${CMAKE_BINARY_DIR}/packaging/install_collector_system_files.cmake
  COMPONENT collector EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/collector/README.md
  DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/perf-collector COMPONENT collector
  EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME perfsdk)
set(CPACK_PACKAGE_VENDOR "perfsdk")
set(CPACK_PACKAGE_CONTACT ${PERF_DEB_MAINTAINER})
set(CPACK_PACKAGE_VERSION ${PERF_DEB_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr) # what cmake --install gets under CPACK_SET_DESTDIR
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON) # debug info: the -dbgsym way is not done (yet)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev collector tools)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${PERF_DEB_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON) # Depends from dpkg-shlibdeps
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://example.invalid/perfsdk")
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS OFF)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
 "performance telemetry SDK for Linux programs (shared libraries)
libperfsdk watches a program's main or event loop and its threads' CPU
time; when the loop hangs or a thread burns CPU it samples the stacks
with a signal-based CFI unwinder and sends them, compressed, to a
perf-collector (or writes them to a local file).

This package holds the shared libraries: libperfsdk.so.0, which programs
link, and libperfsdk-core.so.0, which it loads when the SDK is enabled;
and perf-upload, the process of its own that sends the batches.")
# shlibs (programs built against it depend on libperfsdk0 (>= version));
# ldconfig from a triggers file, not from maintainer scripts.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON) # packages with shared libraries only
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# CPack (3.25) writes a postinst and postrm calling ldconfig for a package
# with libraries under /usr/lib unless it brings its own: ours do nothing.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${PERF_DEB_DIR}/libperfsdk0/triggers
  ${PERF_DEB_DIR}/libperfsdk0/postinst ${PERF_DEB_DIR}/libperfsdk0/postrm)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# The core loads libdw, libelf, zlib and zstd at their first call (sdk/lazy/),
# libcurl for the http sink's first batch (in perf-upload, the upload
# helper, or in the app without it): dpkg-shlibdeps sees none of them
# in the NEEDED entries, so they are named here (shlibdeps adds the rest).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "libdw1 (>= ${LIBDW_VERSION}), libelf1 (>= ${LIBELF_VERSION}), \
libzstd1 (>= ${ZSTD_VERSION}), zlib1g (>= 1:${ZLIB_VERSION})")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "libcurl4 | libcurl3-gnutls")

set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_ARCHITECTURE amd64)
# The static library's own dependencies (perfsdk-static.pc, PerfSDK's
# CMake package): their -dev packages.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libperfsdk0 (= ${PERF_DEB_VERSION}), libdw-dev, libelf-dev, libprotobuf-c-dev, libzstd-dev, zlib1g-dev, libiberty-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION
 "performance telemetry SDK for Linux programs (development files)
libperfsdk watches a program's main or event loop and its threads' CPU
time and samples the stacks of hangs and CPU bursts.

This package holds perf_sdk.h, the header-only event-loop integrations
(perf_sdk_uv.h, perf_sdk_glib.h, perf_sdk_libevent.h), the link-time
libperfsdk.so, the static library libperfsdk.a, the CMake package
(find_package(PerfSDK)) and the pkg-config files perfsdk.pc and
perfsdk-static.pc.")

set(CPACK_DEBIAN_COLLECTOR_PACKAGE_SECTION net)
set(CPACK_DEBIAN_COLLECTOR_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_COLLECTOR_PACKAGE_RECOMMENDS "libdebuginfod1")
set(CPACK_DEBIAN_COLLECTOR_DESCRIPTION
 "collector of the perf SDK's stacks, with a web dashboard
perf-collector receives the batches programs linked with libperfsdk send
(hangs and CPU bursts with their stacks), names their frames from debug
files found by build-id, stores them in SQLite and serves a JSON API, a
web dashboard and pprof / folded-stack exports.

The package runs it as the systemd service perf-collector.service, as the
perf-collector system user, with its settings in /etc/perf-collector/ and
its data in /var/lib/perf-collector.")
set(CPACK_DEBIAN_COLLECTOR_PACKAGE_CONTROL_EXTRA ${PERF_DEB_DIR}/perf-collector/conffiles
  ${PERF_DEB_DIR}/perf-collector/postinst ${PERF_DEB_DIR}/perf-collector/prerm
  ${PERF_DEB_DIR}/perf-collector/postrm)
set(CPACK_DEBIAN_COLLECTOR_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION devel)
# perf-run executes programs with libperfsdk0's preload library in them.
set(CPACK_DEBIAN_TOOLS_PACKAGE_RECOMMENDS "libperfsdk0 (= ${PERF_DEB_VERSION})")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION
 "tools of the perf SDK: perf-dump, perf-symbols and perf-run
perf-dump prints the batches a program linked with libperfsdk wrote to
disk (its spool or file sink) as text or JSON.

perf-run starts an unmodified, dynamically linked program with the SDK
loaded into it (libperfsdk-preload.so, from libperfsdk0), its event
loops found by the calls they wait in.

perf-symbols finds the ELF files of a build by GNU build-id and uploads
their debug information to a perf-collector, skipping what it has.")

include(CPack)
