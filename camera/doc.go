// Package camera turns the robot's observation messages into the world
// model's inputs: camera images (sensor_msgs/Image in rgb8, bgr8, rgba8,
// bgra8 or mono8, and sensor_msgs/CompressedImage in JPEG or PNG) into
// worldmodel.Image (RGB8), the proprio state (std_msgs/Float64MultiArray,
// or sensor_msgs/JointState through a configured joint-name map) into
// float32 values, and the instruction (std_msgs/String) into checked text.
//
// It also writes and reads the image bag: a rosbag2 MCAP bag of two camera
// topics, a proprio topic and a latched instruction topic (WriteBag), and
// walks one into synchronized observations, the latest frames and state
// paired by stamp within a tolerance with the instruction in force
// (OpenBag, BagReader.Next). The pairing policy is BagReader's.
//
// Every message is hostile: sizes are checked against Limits before any
// allocation they would drive (a compressed image's header before it is
// decoded), a raw image's step and data length against its geometry, each
// state value for finiteness; every refusal wraps one of the Err* values
// and names what was wrong and what is accepted.
package camera
