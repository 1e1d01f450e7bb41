"""
Launch the Fast-WAM chunk executor (fastwam_executor) of package fastwam_action_expert.

The executor subscribes to the action expert's ActionChunk messages and
publishes one StampedAction per control period on its own timer. Parameters
come first from params_file (default: the installed executor.params.yaml,
which lists every parameter with its default), then from launch arguments:
every executor parameter is also a launch argument of the same name, and one
given on the command line overrides the file:

    ros2 launch fastwam_action_expert executor.launch.py \
        aggregation:=weighted_average control_period:=0.05

Argument values are read as YAML, like `--ros-args -p name:=value`; an empty
value (the default) leaves the parameter to params_file.
`ros2 launch fastwam_action_expert executor.launch.py --show-args` lists them
all. Start the action expert with action_expert.launch.py beside it; both use
the relative topic action_chunk, so a namespace:= given to both connects them.
On SIGINT the executor stops its timer, publishes a last (STALE)
diagnostics report and exits.
"""

from fastwam_action_expert.launching import node_launch_description

# Every parameter of the executor (executor.ParamNames() in the Go package
# executor; a Go test checks that this list matches), with its
# description.
PARAMETERS = [
    ('control_period', "seconds between two executed actions; every chunk's dt must equal it"),
    ('aggregation', "rows of overlapping chunks at an instant: latest (the newest chunk's), "
     'average (their mean) or weighted_average (old*(1-w) + new*w in stamp order)'),
    ('aggregation_weight', "w of weighted_average, in (0, 1]: the newer chunk's share"),
    ('on_starvation', 'when no chunk covers an instant: hold (republish the last action, '
     'held=true) or stop (publish nothing)'),
    ('diagnostics_period', 'seconds between two diagnostics reports'),
    ('action_dim', 'values per action; 0 = take it from the first chunk'),
    ('topics.action_chunk', 'input ActionChunk topic'),
    ('topics.action', 'output StampedAction topic'),
    ('topics.diagnostics', 'diagnostics topic'),
    ('qos.action_chunk.reliability', 'reliable or best_effort'),
    ('qos.action_chunk.durability', 'volatile or transient_local'),
    ('qos.action_chunk.history', 'keep_last or keep_all'),
    ('qos.action_chunk.depth', 'queue depth of keep_last'),
    ('qos.action.reliability', 'reliable or best_effort'),
    ('qos.action.durability', 'volatile or transient_local'),
    ('qos.action.history', 'keep_last or keep_all'),
    ('qos.action.depth', 'queue depth of keep_last'),
    # control outputs and the hold input (docs/robot.md)
    ('output.type', 'message type of the output on topics.action: stamped_action (StampedAction '
     'per period), joint_trajectory (the remaining actions as a JointTrajectory when the chunk '
     'changes), float64_multi_array (one per period) or twist_stamped (the 6-D delta / dt per '
     'period)'),
    ('output.joint_names', "joint_trajectory's joint names, comma-separated, one per output "
     'dimension'),
    ('output.frame_id', "frame_id of the joint_trajectory's and twist_stamped's header (empty = "
     "the chunk's)"),
    ('output.gripper_topic', 'std_msgs/Float64 topic of the gripper dimension, one per period '
     '(empty = none; the main output then carries the other dimensions)'),
    ('output.gripper_dim', "the gripper's dimension (-1 = the last)"),
    ('topics.hold', 'std_msgs/Bool input: true holds the robot (hold_mode) until false (empty = '
     'no hold input)'),
    ('hold_mode', 'while held: hold (keep commanding the last action; a zero twist for '
     'twist_stamped) or stop (publish nothing)'),
    ('shutdown_grace', 'seconds, in [0.01, 3600], the shutdown after the first SIGINT/SIGTERM '
     'may take before the node exits at once; a second signal exits at once'),
    ('use_sim_time', "standard ROS parameter: true puts the executor's clock, its control "
     'instants and its diagnostics period on /clock'),
]


def generate_launch_description():
    return node_launch_description('fastwam_executor', 'fastwam_executor', 'executor.params.yaml', PARAMETERS)  # noqa: E501
