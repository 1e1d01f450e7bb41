"""Launch the Fast-WAM chunk executor (fastwam_executor) of package fastwam_action_expert.

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
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

PACKAGE = 'fastwam_action_expert'

# Every parameter of the executor (executor.ParamNames() in the Go package
# node/executor; a Go test checks that this list matches), with its
# description.
PARAMETERS = [
    ("control_period", "seconds between two executed actions; every chunk's dt must equal it"),
    ("aggregation", "rows of overlapping chunks at an instant: latest (the newest chunk's), average (their mean) or weighted_average (old*(1-w) + new*w in stamp order)"),
    ("aggregation_weight", "w of weighted_average, in (0, 1]: the newer chunk's share"),
    ("on_starvation", "when no chunk covers an instant: hold (republish the last action, held=true) or stop (publish nothing)"),
    ("diagnostics_period", "seconds between two diagnostics reports"),
    ("action_dim", "values per action; 0 = take it from the first chunk"),
    ("topics.action_chunk", "input ActionChunk topic"),
    ("topics.action", "output StampedAction topic"),
    ("topics.diagnostics", "diagnostics topic"),
    ("qos.action_chunk.reliability", "reliable or best_effort"),
    ("qos.action_chunk.durability", "volatile or transient_local"),
    ("qos.action_chunk.history", "keep_last or keep_all"),
    ("qos.action_chunk.depth", "queue depth of keep_last"),
    ("qos.action.reliability", "reliable or best_effort"),
    ("qos.action.durability", "volatile or transient_local"),
    ("qos.action.history", "keep_last or keep_all"),
    ("qos.action.depth", "queue depth of keep_last"),
    ("shutdown_grace", "seconds, in [0.01, 3600], the shutdown after the first SIGINT/SIGTERM may take before the node exits at once; a second signal exits at once"),
    ("use_sim_time", "standard ROS parameter: true puts the executor's clock, its control instants and its diagnostics period on /clock"),
]


def _launch_node(context):
    # Launch arguments reach the node as `-p name:=value` rules, as given:
    # the node reads each value with ROS's YAML rules, and a bad one (say
    # steps:=abc) is reported against its rule, not against a temporary
    # params file that launch_ros would write for a parameters dict.
    rules = []
    for name, _ in PARAMETERS:
        text = LaunchConfiguration(name).perform(context)
        if text != '':
            rules += ['-p', f'{name}:={text}']
    # The params file goes in the same argument list, before the rules:
    # rcl and the node apply parameters in command-line order, and launch_ros
    # would put a `parameters` file after these arguments, where its
    # defaults would override the rules.
    params_file = LaunchConfiguration('params_file').perform(context)
    return [Node(
        package=PACKAGE,
        executable='fastwam_executor',
        name=LaunchConfiguration('node_name'),
        namespace=LaunchConfiguration('namespace'),
        arguments=['--ros-args', '--log-level', LaunchConfiguration('log_level'),
                   '--params-file', params_file] + rules,
        output='screen',
        emulate_tty=True,
        # On SIGINT the executor stops its timer, publishes a last (STALE)
        # diagnostics report and exits; if that takes longer than
        # shutdown_grace, it exits at once. The SIGTERM sent after
        # sigterm_timeout counts as a second signal.
        sigterm_timeout='10',
    )]


def generate_launch_description():
    share = get_package_share_directory(PACKAGE)
    args = [
        DeclareLaunchArgument(
            'params_file',
            default_value=os.path.join(share, 'launch', 'executor.params.yaml'),
            description='ROS 2 params file read before the parameter arguments'),
        DeclareLaunchArgument('node_name', default_value='fastwam_executor',
                              description='name of the node'),
        DeclareLaunchArgument('namespace', default_value='', description='namespace of the node'),
        DeclareLaunchArgument('log_level', default_value='info',
                              description='debug, info, warn, error or fatal'),
    ]
    args += [DeclareLaunchArgument(name, default_value='', description=doc)
             for name, doc in PARAMETERS]
    return LaunchDescription(args + [OpaqueFunction(function=_launch_node)])
