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
# node/executor; a Go test checks that this list matches), with its
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
    ('shutdown_grace', 'seconds, in [0.01, 3600], the shutdown after the first SIGINT/SIGTERM may '
     'take before the node exits at once; a second signal exits at once'),
    ('use_sim_time', "standard ROS parameter: true puts the executor's clock, its control "
     'instants and its diagnostics period on /clock'),
]


def generate_launch_description():
    return node_launch_description('fastwam_executor', 'fastwam_executor', 'executor.params.yaml', PARAMETERS)  # noqa: E501
