// Package bag writes and reads rosbag2 bags in MCAP storage: a folder with
// metadata.yaml and <folder name>_0.mcap, laid out as ROS 2 Humble's (or, with
// WriterOptions.MetadataVersion, Jazzy's) rosbag2
// (with the rosbag2_storage_mcap plugin) writes them, so `ros2 bag info` and
// `ros2 bag play` accept the bags written here, and bags recorded by rosbag2
// read back here.
//
// The MCAP file follows rosbag2's conventions: profile "ros2", a "rosbag2"
// metadata record with ROS_DISTRO, one schema per message type named
// "package/msg/Type" with encoding "ros2msg" and the full definition text
// (msgs.Definition), one channel per topic with message encoding "cdr" and
// the offered QoS profiles under the channel metadata key
// "offered_qos_profiles", and messages whose publish time equals their log
// time. Messages are CDR bytes with their encapsulation header, exactly as
// ROS 2 puts them on the wire.
//
// The reader also reads bags of rosbag2's sqlite3 storage, the default of
// Humble's `ros2 bag record` (Jazzy's with -s sqlite3): a folder with metadata.yaml
// (storage_identifier sqlite3) and .db3 files, or a single .db3 file,
// through the pure-Go modernc.org/sqlite driver (see sqlite.go). This
// package writes MCAP only; bag/bagtest writes sqlite3 bags for tests.
package bag
