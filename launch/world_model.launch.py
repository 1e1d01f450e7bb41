"""
Launch the Fast-WAM world-model node (fastwam_world_model) of package fastwam_action_expert.

The node subscribes to the robot's cameras (topics.cameras), proprio state
(topics.proprio) and instruction (topics.instruction, latched), runs the world
model on the CPU and publishes the TextContext and the video K/V cache (over
DDS, or a KVHandoff into shared memory with kv_transport:=shm) that the
action-expert node turns into chunks. Parameters come first from params_file
(default: the installed world_model.params.yaml, which lists every parameter
with its default), then from launch arguments: every node parameter is also a
launch argument of the same name, and one given on the command line overrides
the file:

    ros2 launch fastwam_action_expert world_model.launch.py \
        model.dit_weights:=/models/dit.safetensors \
        model.vae_weights:=/models/vae.safetensors \
        model.dataset_stats:=/models/dataset_stats.json model.text_cache:=/models/text

Argument values are read as YAML, like `--ros-args -p name:=value`; an empty
value (the default) leaves the parameter to params_file.
`ros2 launch fastwam_action_expert world_model.launch.py --show-args` lists
them all. policy.launch.py starts it with the action expert and the executor.
The node is a managed (lifecycle) node, started as a launch_ros LifecycleNode;
with autostart (the default) it configures and activates itself, and with
autostart:=false it waits unconfigured for `ros2 lifecycle set` or a lifecycle
manager. On SIGINT the node finishes or abandons the cycle in progress, publishes a
last (STALE) diagnostics report, removes its shared-memory segment and exits.
"""

from fastwam_action_expert.launching import node_launch_description

# Every parameter of the world-model node (wmnode.ParamNames() in the Go
# package wmnode; a Go test checks that this list matches), with its
# description.
PARAMETERS = [
    ('model.dit_weights', 'the video DiT and proprio encoder (the DiT weight file contract, '
     'docs/world-model.md)'),
    ('model.vae_weights', 'the Wan2.2 VAE encoder weights'),
    ('model.dataset_stats', "the checkpoint's dataset_stats.json (state statistics)"),
    ('model.state_key', 'the state key of dataset_stats.json'),
    ('model.text_cache', 'the folder of per-instruction text cache entries'),
    ('image_transports', 'camera messages, one per camera or one for all: raw '
     '(sensor_msgs/Image) or compressed (sensor_msgs/CompressedImage, JPEG or PNG)'),
    ('flip_cameras', "rotate every camera image by 180° before the crop-resize (LIBERO's raw "
     'renders); false for training-orientation images'),
    ('proprio.type', "the proprio topic's message: float64_multi_array (the values in order) or "
     'joint_state (positions of proprio.joint_names)'),
    ('proprio.joint_names', 'joint_state: the joints whose positions make the state, in order'),
    ('topics.cameras', "camera topics in the world model's order (agentview, then wrist); one or "
     'two'),
    ('topics.proprio', 'proprio state topic'),
    ('topics.instruction', 'instruction topic (std_msgs/String, latched)'),
    ('topics.video_kv_cache', 'VideoKVCache output (kv_transport dds)'),
    ('topics.text_context', 'TextContext output'),
    ('topics.diagnostics', 'diagnostics topic'),
    ('sync.tolerance', 'seconds each camera frame and the state may be from the newest frame of '
     'a cycle'),
    ('rate', 'cycles per second, in [0, 1000]; 0 runs a cycle on each new set of frames'),
    ('kv_transport', 'dds (VideoKVCache messages) or shm (K/V written into a shared-memory slot, '
     'KVHandoff descriptors)'),
    ('kv_dtype', 'element type of the K/V: float32 or float16'),
    ('shm.topic', 'KVHandoff descriptor topic (kv_transport shm)'),
    ('shm.dir', 'folder of the shared-memory segment'),
    ('shm.prefix', 'segment name prefix (the segment is <prefix>.<pid>)'),
    ('shm.slots', 'slots of the segment, in [2, 64]'),
    ('shm.group', 'make the segment readable by the group (0660) rather than the owner only '
     '(0600)'),
    ('qos.cameras.reliability', 'reliable or best_effort'),
    ('qos.cameras.durability', 'volatile or transient_local'),
    ('qos.cameras.history', 'keep_last or keep_all'),
    ('qos.cameras.depth', 'queue depth of keep_last, in [1, 1000]'),
    ('qos.proprio.reliability', 'reliable or best_effort'),
    ('qos.proprio.durability', 'volatile or transient_local'),
    ('qos.proprio.history', 'keep_last or keep_all'),
    ('qos.proprio.depth', 'queue depth of keep_last, in [1, 1000]'),
    ('qos.instruction.reliability', 'reliable or best_effort'),
    ('qos.instruction.durability', 'volatile or transient_local'),
    ('qos.instruction.history', 'keep_last or keep_all'),
    ('qos.instruction.depth', 'queue depth of keep_last, in [1, 1000]'),
    ('qos.out.reliability', 'reliable or best_effort'),
    ('qos.out.durability', 'volatile or transient_local'),
    ('qos.out.history', 'keep_last or keep_all'),
    ('qos.out.depth', 'queue depth of keep_last, in [1, 1000]'),
    ('diagnostics.stale_after', 'seconds an input, or the clock, may stay silent before the '
     'diagnostics say STALE'),
    ('diagnostics.period', 'seconds between two diagnostics reports'),
    ('shutdown_grace', 'seconds the shutdown after the first SIGINT/SIGTERM may take'),
    ('use_sim_time', "standard ROS parameter: the node's clock (input ages, stale checks) is "
     '/clock'),
    ('self_test.golden', 'self-test golden .npz run through the world model at configure, K, V '
     'and context compared (empty = none)'),
    ('self_test.min_cosine', 'cosine K, V and the context must each reach against the self-test '
     'golden, in (0, 1]'),
    ('autostart', 'configure and activate at start-up; false waits unconfigured for `ros2 '
     'lifecycle set` or a lifecycle manager'),
]


def generate_launch_description():
    return node_launch_description('fastwam_world_model', 'fastwam_world_model', 'world_model.params.yaml', PARAMETERS)  # noqa: E501
