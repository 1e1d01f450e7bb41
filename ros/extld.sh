#!/bin/sh
# extld.sh: the external linker for the rclgo-tagged binaries (go build -ldflags=-extld=...,
# set by ros/rosgo.sh). It runs the C compiler go would run ($CC, else gcc) with the same
# arguments, minus the library paths rclgo's cgo directives hard-code (flags.gen.go:
# -L/opt/ros/humble/lib, -Wl,-rpath=/opt/ros/humble/lib, -Wl,-rpath=/usr/lib). Without this the
# binaries' RUNPATH names /opt/ros/humble/lib whatever install they were built against; Go has no
# flag to drop a cgo package's LDFLAGS, and this keeps rclgo itself unchanged.
set -eu
n=$#
while [ "$n" -gt 0 ]; do
  a=$1
  shift
  n=$((n - 1))
  case "$a" in
    -L/opt/ros/humble/lib | -Wl,-rpath=/opt/ros/humble/lib | -Wl,-rpath=/usr/lib) ;;
    *) set -- "$@" "$a" ;;
  esac
done
exec ${CC:-gcc} "$@"
