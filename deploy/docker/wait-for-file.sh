#!/bin/sh
# wait-for-file FILE SECONDS CMD...: waits until FILE exists (the marker a
# finished `flotilla-tool pack --workers` folder ends with), then runs CMD
# in its place. Compose's depends_on conditions are not honoured by every
# runtime (podman-compose 1.0 ignores them), so services wait for the
# prepared model themselves.
set -eu
file="$1"; seconds="$2"; shift 2
waited=0
while [ ! -e "$file" ]; do
  if [ "$waited" -ge "$seconds" ]; then
    echo "wait-for-file: $file did not appear within $seconds s (did the prepare service fail? see its log)" >&2
    exit 1
  fi
  [ "$waited" -eq 0 ] && echo "wait-for-file: waiting for $file" >&2
  sleep 1
  waited=$((waited + 1))
done
exec "$@"
