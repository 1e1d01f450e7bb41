//go:build !rclgo

// Command fastwam_world_model is the Fast-WAM world-model ROS 2 node. This
// build has no ROS 2 support: the node needs rclgo, which compiles only
// against a ROS 2 installation (Jazzy or Humble; docs/ros2.md). Rebuild it
// with the build tag:
//
//	source /opt/ros/jazzy/setup.bash    # or /opt/ros/humble
//	ros/rosgo.sh go build -tags rclgo ./cmd/fastwam_world_model    # cgo flags from AMENT_PREFIX_PATH
//
// The node itself (package wmnode) runs without ROS on the in-process
// transport, as in its tests.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "fastwam_world_model was built without ROS 2 support; rebuild it with `go build -tags rclgo ./cmd/fastwam_world_model` against a sourced ROS 2 (ros/rosgo.sh sets the cgo flags)")
	os.Exit(1)
}
