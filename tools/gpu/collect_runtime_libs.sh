#!/usr/bin/env bash
# Copies the shared libraries the given binaries need, except the C library's own (libc, libm,
# ld.so, ...), into DEST, so the binaries run on a machine without the build's packages (the GPU
# machine): run there with LD_LIBRARY_PATH=DEST.
#   tools/gpu/collect_runtime_libs.sh DEST BINARY...
set -euo pipefail
if (($# < 2)); then
  echo "usage: $0 DEST BINARY..." >&2
  exit 2
fi
dest=$1
shift
mkdir -p "$dest"
for binary in "$@"; do
  [ -x "$binary" ] || { echo "$0: $binary is not an executable" >&2; exit 2; }
done
ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r library; do
  case "$(basename "$library")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libresolv.so.*) continue ;;
    libcuda.so.*|libnvidia*) continue ;;  # the driver's, from the machine itself
  esac
  cp -L "$library" "$dest/"
done
echo "$(ls "$dest" | wc -l) libraries in $dest ($(du -sh "$dest" | cut -f1))"
