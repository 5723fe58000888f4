#!/bin/bash
# Stages bin/ lib/ lib-glibc/ from a Release build in STAGE and packs
# them into .devbundle/bundle.tar.xz (git-ignored), for rpc_overhead.sh on a
# machine without the Debian gRPC stack (the repo's tracked files are ~45 MiB of
# the device's 64 MiB transfer limit, so the 28 MiB tree travels as ~8 MiB xz).
#   [OLD_BIN=DIR] bench/distributed/device/make_bundle.sh [BUILD_DIR] [SRC_DIR]
#   (default /work/wt-device/build-rel)
set -euo pipefail
BUNDLE_DIR=${BUNDLE_DIR:-$(git rev-parse --show-toplevel)/.devbundle}
mkdir -p "$BUNDLE_DIR"
D=${STAGE:-/work/devbundle-stage}
mkdir -p "$D"
BUILD=${1:-/work/wt-device/build-rel}
SRC=${2:-$(dirname "$BUILD")}
BINS="flotilla-tool flotilla-expert-worker flotilla-bench-distributed flotilla-bench-loopback flotilla-bench-grpc-pingpong"
rm -rf "$D/bin" "$D/lib" "$D/lib-glibc" "$D/scripts"
mkdir -p "$D/bin" "$D/lib" "$D/lib-glibc"
for b in $BINS; do cp "$BUILD/bin/$b" "$D/bin/"; strip --strip-unneeded "$D/bin/$b"; done
# glibc's own libraries go to lib-glibc/ (used only if the target's glibc is too old).
is_glibc() {
  case $1 in libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libresolv.so.*|libmvec.so.*|libutil.so.*|libanl.so.*|libnss_*) return 0;; esac
  return 1
}
for b in $BINS; do ldd "$BUILD/bin/$b"; done | awk '/=>/ && $3 ~ /^\// {print $1, $3} /^\t\/.*ld-linux/ {print $1, $1}' | sort -u |
while read -r name path; do
  real=$(readlink -f "$path"); base=$(basename "$name")
  if is_glibc "$base"; then dst=$D/lib-glibc; else dst=$D/lib; fi
  cp "$real" "$dst/$base"; chmod u+w "$dst/$base"
  [[ $dst == "$D/lib" ]] && strip --strip-unneeded "$dst/$base"
done
# glibc version the bundle needs at most (checked by run.sh at start).
objdump -T "$D"/bin/* "$D"/lib/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 > "$D/glibc-needed.txt"
git -C "$SRC" rev-parse HEAD > "$D/commit.txt"
du -sh "$D"
# Optional A/B: worker binaries of an older commit, in bin-old/ (OLD_BIN).
EXTRA=()
if [[ -n ${OLD_BIN:-} ]]; then
  rm -rf "$D/bin-old"; cp -r "$OLD_BIN" "$D/bin-old"; EXTRA=(bin-old)
  [[ -f $OLD_BIN/../commit.txt ]] && cp "$OLD_BIN/../commit.txt" "$D/commit-old.txt" && EXTRA+=(commit-old.txt)
fi
tar -C "$D" -cf - bin lib lib-glibc glibc-needed.txt commit.txt "${EXTRA[@]}" | xz -9 -T2 > "$BUNDLE_DIR/bundle.tar.xz.tmp"
mv "$BUNDLE_DIR/bundle.tar.xz.tmp" "$BUNDLE_DIR/bundle.tar.xz"
ls -la "$BUNDLE_DIR/bundle.tar.xz"
