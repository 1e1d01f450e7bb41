// Package replay runs the action-expert node over a recorded rosbag2 bag
// without ROS, and writes such bags from golden inputs.
//
// A replay feeds the recorded VideoKVCache and TextContext messages, in
// log-time order and as the CDR bytes that were on the wire, to a node.Node
// through the in-process node.Bus, exactly as ROS would deliver them: the
// node decodes, validates, pairs, denoises on the given backend and
// encodes. The ActionChunks it publishes are matched by header stamp with
// the chunks recorded on the node's output topic and compared (cosine and
// max |error| of the actions); Report holds the per-chunk verdicts and the
// pass/fail gate. The node's clock during a replay is the bag's: the log
// time of the last message fed plus the real time since, so input ages and
// pairing timeouts behave as they did when the bag was recorded.
//
// The feed is paced: the node's worker takes the newest pair only, so the
// replay waits for each pair's outcome (a chunk, a rejection or a backend
// error; never longer than a timeout) before it feeds on.
//
// MakeBag writes a regression bag: inputs built from golden cases, run
// through the same pipeline with the CPU reference backend, and the chunks
// it produced recorded as the expected output.
package replay
