# cmake/toolchain-aarch64.cmake - cross build for Linux aarch64 with
# Debian's gcc-aarch64-linux-gnu and the arm64 development packages
# installed through multiarch (scripts/deps.sh: PERF_AARCH64_PACKAGES);
# the tests run under qemu-user (scripts/test_aarch64.sh):
#   cmake -S . -B build-aarch64 -G Ninja \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake -DPERF_CROSS_TESTS_ONLY=ON
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_ASM_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# The arm64 libraries and headers live beside the host's (multiarch):
# search the aarch64 directories only, host programs (protoc-c) on PATH.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_LIBRARY_PATH /usr/lib/aarch64-linux-gnu)
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# ctest runs the programs under qemu-user with the multiarch libc6:arm64
# (QEMU_LD_PREFIX=/: its loader is /lib/ld-linux-aarch64.so.1). The cross
# toolchain's own loader (/usr/aarch64-linux-gnu) hangs at the first
# pthread_create when paired with the multiarch libc.
find_program(PERF_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR "env;QEMU_LD_PREFIX=/;${PERF_QEMU_AARCH64}")
