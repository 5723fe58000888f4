# Cross-compiling for 64-bit ARM with Debian's cross toolchain
# (g++-aarch64-linux-gnu) against multiarch arm64 libraries installed
# beside the host's (libabsl-dev:arm64, libgtest-dev:arm64,
# libhwy-dev:arm64): their CMake files live under /usr/lib/aarch64-linux-gnu.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Tests run under qemu-user on the multiarch arm64 loader (run.sh).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
