#!/bin/sh
# rosgo.sh: run a go command against the sourced ROS 2 install (Humble or Jazzy).
#
#   source /opt/ros/jazzy/setup.bash          # or any install or workspace
#   ros/rosgo.sh go build -tags rclgo -o fastwam_node ./cmd/fastwam_node
#   ros/rosgo.sh go vet -tags rclgo ./...
#   ros/rosgo.sh --print                      # the environment it sets, as shell assignments
#
# rclgo's own cgo directives name /opt/ros/humble and /usr; this script sets CGO_CFLAGS and
# CGO_LDFLAGS from every prefix in AMENT_PREFIX_PATH instead (-I$p/include, -I$p/include/<pkg>,
# -L$p/lib), which cgo puts before rclgo's. The final link goes through ros/extld.sh, which drops
# rclgo's hard-coded -L/opt/ros/humble/lib and -rpath entries, so the binaries carry no RUNPATH
# and find the ROS libraries through the sourced setup (LD_LIBRARY_PATH), like every ROS 2
# binary. Binaries are stamped with the git revision when the source is a working git
# checkout (go version -m shows vcs.revision), and built without it otherwise.
# CMakeLists.txt builds the nodes through this script, so colcon and a developer get the same flags.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")

if [ -z "${AMENT_PREFIX_PATH:-}" ]; then
  echo "rosgo.sh: AMENT_PREFIX_PATH is empty: source a ROS 2 setup.bash (Humble or Jazzy) first" >&2
  exit 2
fi

cflags="-O2"
ldflags=""
seen=":"
old_ifs=$IFS
IFS=:
for p in $AMENT_PREFIX_PATH; do
  case "$seen" in *":$p:"*) continue ;; esac
  seen="$seen$p:"
  if [ -d "$p/include" ]; then
    cflags="$cflags -I$p/include"
    for inc in "$p"/include/*/; do
      [ -d "$inc" ] && cflags="$cflags -I${inc%/}"
    done
  fi
  [ -d "$p/lib" ] && ldflags="$ldflags -L$p/lib"
done
IFS=$old_ifs

# VCS stamping: on in a git checkout whose status git can read, off elsewhere (a tarball, a
# copy without .git, or a machine without git), where go build would otherwise fail with
# "error obtaining VCS status".
if command -v git >/dev/null 2>&1 && git -C "$src" status --porcelain >/dev/null 2>&1; then
  buildvcs=auto
else
  buildvcs=false
fi

CGO_ENABLED=1
CGO_CFLAGS="$cflags"
CGO_LDFLAGS="${ldflags# }"
# GOFLAGS keeps what `go env GOFLAGS` holds (the environment or go env -w); the settings here
# come after it, and the last of a repeated flag wins.
base=$(go env GOFLAGS 2>/dev/null || true)
GOFLAGS="${base:+$base }-buildvcs=$buildvcs -ldflags=-extld=$here/extld.sh"
export CGO_ENABLED CGO_CFLAGS CGO_LDFLAGS GOFLAGS

if [ "${1:-}" = "--print" ]; then
  for v in CGO_ENABLED CGO_CFLAGS CGO_LDFLAGS GOFLAGS; do
    eval "printf '%s=\"%s\"\n' $v \"\$$v\""
  done
  exit 0
fi
if [ $# -eq 0 ]; then
  echo "usage: ros/rosgo.sh go build|vet|test ... (or --print)" >&2
  exit 2
fi
exec "$@"
