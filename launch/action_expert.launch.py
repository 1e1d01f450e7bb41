"""
Launch the Fast-WAM action-expert node of package fastwam_action_expert.

Parameters come first from params_file (default: the installed
action_expert.params.yaml, which lists every parameter with its default),
then from launch arguments: every node parameter is also a launch argument
of the same name, and one given on the command line overrides the file:

    ros2 launch fastwam_action_expert action_expert.launch.py \
        htp.context_binary:=/models/action_step.bin steps:=8 \
        clip.min:='[-1.0]' clip.max:='[1.0]'

Argument values are read as YAML, like `--ros-args -p name:=value`; an empty
value (the default) leaves the parameter to params_file.
`ros2 launch fastwam_action_expert action_expert.launch.py --show-args`
lists them all.
On SIGINT the node finishes or abandons the chunk in progress, closes the
backend (withdrawing the HTP performance vote) and exits.
"""

from fastwam_action_expert.launching import node_launch_description

# Every parameter of the node (params.Names() in the Go package node/params; a Go
# test checks that this list matches), with its description.
PARAMETERS = [
    ('backend', 'step backend: htp or cpu'),
    ('htp.context_binary', 'path of the action_step QNN context binary'),
    ('htp.backend_library', 'QNN HTP backend library'),
    ('htp.system_library', 'QNN system library'),
    ('htp.rpcmem_library', 'library providing rpcmem_alloc (libcdsprpc.so)'),
    ('htp.graph_name', 'graph name inside the context binary'),
    ('htp.performance_mode', 'HTP performance mode: burst, high_performance, balanced, '
     'power_saver, default'),
    ('htp.shared_buffers', 'use zero-copy rpcmem buffers for the inputs'),
    ('htp.log_level', 'QNN library log level: 1 error, 2 warn, 3 info, 4 verbose, 5 debug (its '
     "lines go to the node's log)"),
    ('htp.rpc_vote', 'also send the RPC control-latency and polling-time options of the '
     'performance vote (their own setPowerConfig call; off until verified on the device)'),
    ('htp.context_paths', 'comma-separated further context binaries loaded in the same session '
     "(one spill-fill group): the split bundle's action_context and action_step_ctx, and "
     "with htp.world_model same_process the world model's vae_encoder and prefill_i"),
    ('htp.world_model', "where the world model's graphs run: other_process (its own node, "
     "K/V through the hand-off) or same_process (in this node's QNN session, its binaries "
     'in htp.context_paths); a process maps about 6.5 GB of contexts at most'),
    ('cpu.weights', "path of the action expert's safetensors weights"),
    ('cpu.threads', 'worker goroutines of the CPU step over a single-threaded OpenBLAS (0 = one '
     'per CPU)'),
    ('cpu.video_tokens', 'cached video tokens per layer the CPU backend accepts (0 = from the '
     "weights' config, else 98)"),
    ('cpu.context_tokens', "context tokens the CPU backend accepts (0 = from the weights' "
     'config, else 129)'),
    ('steps', 'Euler steps per chunk'),
    ('shift', 'schedule shift'),
    ('noise_seed', 'base seed of the initial noise; a chunk uses noise_seed + the seq of its '
     'VideoKVCache'),
    ('control_period', 'seconds (LIBERO: 0.05): the control period; action i of a chunk is for '
     'header.stamp + i*control_period'),
    ('rtc.mode', 'real-time chunking: off, replace or guided'),
    ('rtc.inference_delay', 'd in actions (rows weighted 1): an integer in [0, '
     'rtc.execution_horizon] or auto'),
    ('rtc.execution_horizon', 'actions, 1..action_tokens: rows from here on are not tied to the '
     'previous chunk'),
    ('rtc.max_guidance', "beta > 0: the clip of RTC's guidance weight (guided mode)"),
    ('rtc.schedule', 'soft mask between d and the horizon: exp, linear, ones or zeros'),
    ('topics.kv_cache', 'input VideoKVCache topic'),
    ('topics.context', 'input TextContext topic'),
    ('topics.actions', 'output ActionChunk topic'),
    ('topics.diagnostics', 'diagnostics topic'),
    ('qos.kv_cache.reliability', 'reliable or best_effort'),
    ('qos.kv_cache.durability', 'volatile or transient_local'),
    ('qos.kv_cache.history', 'keep_last or keep_all'),
    ('qos.kv_cache.depth', 'queue depth of keep_last'),
    ('qos.context.reliability', 'reliable or best_effort'),
    ('qos.context.durability', 'volatile or transient_local'),
    ('qos.context.history', 'keep_last or keep_all'),
    ('qos.context.depth', 'queue depth of keep_last'),
    ('qos.actions.reliability', 'reliable or best_effort'),
    ('qos.actions.durability', 'volatile or transient_local'),
    ('qos.actions.history', 'keep_last or keep_all'),
    ('qos.actions.depth', 'queue depth of keep_last'),
    ('sync.policy', 'pairing of the inputs: exact (same stamp) or latest (newest context)'),
    ('sync.buffer', 'messages held per input while waiting for a partner'),
    ('sync.timeout', 'seconds an input waits for its partner'),
    ('max_input_age', 'seconds; older inputs are rejected (0 = no limit)'),
    ('diagnostics.stale_after', 'seconds without an input pair, while active, after which '
     '/diagnostics reports STALE (0 = never)'),
    ('kv_transport', 'how the keys and values arrive: dds (VideoKVCache on topics.kv_cache) or '
     'shm (KVHandoff on shm.topic, tensors in shared memory)'),
    ('shm.topic', 'input KVHandoff topic (kv_transport shm)'),
    ('shm.dir', 'folder of the shared-memory segments (kv_transport shm)'),
    ('shm.allowed_uids', "comma-separated uids a segment's owner may have (empty = the node's "
     'own uid)'),
    ('shutdown_grace', 'seconds, in [0.01, 3600], the shutdown after the first SIGINT/SIGTERM '
     'may take before the node exits at once (status 130/143); a second signal exits at once'),
    ('clip.min', 'lower action bound: one value or one per action dimension (empty = none)'),
    ('clip.max', 'upper action bound: one value or one per action dimension (empty = none)'),
    ('dry_run', 'publish chunks flagged dry_run (not for the robot)'),
    ('self_test.golden', 'golden .npz checked through the backend at start-up (empty = none)'),
    ('self_test.skip', 'go active without the golden self-test'),
    ('self_test.min_cosine', 'cosine the self-test must reach'),
    # actions.*: post-processing for the robot (docs/robot.md)
    ('actions.norm_mode', "un-normalisation of the model's rows for the robot, as upstream's "
     'normaliser: off, min/max, q01/q99, z-score, or constant bounds "a/b" (e.g. "-1/1")'),
    ('actions.stats_file', "the checkpoint's dataset_stats.json (required by min/max, q01/q99 "
     'and z-score)'),
    ('actions.stats_key', 'the action key of dataset_stats.json ("default" for LIBERO)'),
    ('actions.stepwise', 'use the stepwise_ statistics (one row per chunk row) instead of '
     'global_'),
    ('actions.gripper.dim', "the gripper's action dimension (-1 = the last)"),
    ('actions.gripper.affine', "after un-normalising, map the gripper g to 2g - 1 (upstream's 0 "
     '= close, 1 = open to [-1, 1])'),
    ('actions.gripper.invert', "then map the gripper g to -g (LIBERO's controller: -1 = open)"),
    ('actions.gripper.binarize', 'then map the gripper g to sign(g)'),
    ('actions.limits.min', 'lower bound of the executable actions: one value or one per action '
     'dimension (empty = none)'),
    ('actions.limits.max', 'upper bound of the executable actions: one value or one per action '
     'dimension (empty = none)'),
    ('actions.limits.max_step', 'largest change of a dimension between consecutive actions, '
     'across chunk seams too: one value or one per action dimension (empty = none)'),
    ('actions.limits.mode', 'a value over a limit: clamp (into the bounds, the step to '
     'max_step) or refuse (the chunk is not published)'),
    ('actions.topic', 'output ActionChunk topic of the executable actions (published when any '
     'actions.* post-processing is set)'),
    ('use_sim_time', "standard ROS parameter: true puts the node's clock on /clock (stamps, "
     'input ages, stale checks, pairing timeouts); latencies stay on the monotonic clock'),
    ('autostart', 'configure and activate at start-up; false waits unconfigured for `ros2 '
     'lifecycle set` or a lifecycle manager'),
]


def generate_launch_description():
    return node_launch_description('fastwam_node', 'fastwam_action_expert', 'action_expert.params.yaml', PARAMETERS)  # noqa: E501
