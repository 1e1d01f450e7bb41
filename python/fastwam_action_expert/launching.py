"""
The launch description both launch files of fastwam_action_expert use.

action_expert.launch.py and executor.launch.py each list their node's
parameters and call node_launch_description; this module (installed beside
the package's message modules and the producer kit) builds the arguments and
the node action the same way for both.

The action expert (fastwam_node) and the world model (fastwam_world_model)
are managed nodes: each is started as a launch_ros LifecycleNode, so launch
sees its transitions as events (the StateTransition events of launch_ros).
The executor has no lifecycle and is a plain Node. If a node exits with a
non-zero status (it could not start, for example a bad parameter), launch
shuts down and `ros2 launch` exits
with status 1. So does a launch argument that the launch file does not
declare (a misspelt parameter would otherwise be dropped in silence), when
the launch file is the one `ros2 launch` runs.
"""

import difflib
import os
import sys

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node

PACKAGE = 'fastwam_action_expert'

# The package's executables that are managed (lifecycle) nodes.
LIFECYCLE_EXECUTABLES = ('fastwam_node', 'fastwam_world_model')


class NodeFailed(RuntimeError):
    """A node of the launch exited with a non-zero status."""


class UndeclaredArgument(ValueError):
    """`ros2 launch` was given an argument its launch file does not declare."""


def launch_files(params_yaml):
    """Return the names of the two launch files that start the node of params_yaml."""
    stem = params_yaml[: -len('.params.yaml')]
    return (f'{stem}.launch.py', f'{stem}.launch.xml')


def check_arguments(argv, command, files, declared):
    """
    Raise UndeclaredArgument for an argument of argv that is not declared.

    argv are the launch arguments (name:=value) given to `ros2 launch`,
    command its whole command line (sys.argv), files the names of the
    launch files this check is for and declared the names they declare.
    The check applies only when command runs one of files (by package or
    by path): a launch file that includes ours may declare arguments of its
    own, which are not ours to judge.
    """
    if not any(os.path.basename(a) in files for a in command[1:]):
        return
    unknown = [a.split(':=', 1)[0] for a in argv if a.split(':=', 1)[0] not in declared]
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, declared, n=3)
        if close:
            hints.append(f'{name}: did you mean {" or ".join(close)}?')
    raise UndeclaredArgument(
        f'launch argument(s) {", ".join(unknown)} not declared by {files[0]} '
        f'(nor {files[1]}); {" ".join(hints) + " " if hints else ""}'
        f'the declared arguments are: {", ".join(declared)} '
        '(`ros2 launch fastwam_action_expert '
        f'{files[0]} --show-args` describes them)'
    )


def fail_on_error_exit(event, context):
    """
    Make launch fail when the process of event exited with an error.

    Raised from an event handler, the exception makes launch log it, shut
    down the other processes and return 1 (`ros2 launch` exits with it);
    a node that exits 0 (after SIGINT, or on its own) does not.
    """
    if event.returncode != 0:
        raise NodeFailed(
            f'{event.action.name} exited with status {event.returncode}: '
            'the node could not start or stopped on an error (see its log above)'
        )


def node_launch_description(executable, node_name, params_yaml, parameters):
    """
    Return the LaunchDescription that starts one node of the package.

    executable is the node binary (fastwam_node, fastwam_executor),
    node_name the default of the node_name argument, params_yaml the params
    file under the package's share/launch read before the parameter
    arguments, and parameters the node's (name, description) pairs: each
    becomes a launch argument of that name with an empty default, which
    leaves the parameter to the params file.
    """
    declared = ['params_file', 'node_name', 'namespace', 'log_level'] + [n for n, _ in parameters]

    def launch_node(context):
        check_arguments(context.argv, sys.argv, launch_files(params_yaml), declared)
        # Launch arguments reach the node as `-p name:=value` rules, as
        # given: the node reads each value with ROS's YAML rules, and a bad
        # one (say steps:=abc) is reported against its rule, not against a
        # temporary params file that launch_ros would write for a
        # parameters dict.
        rules = []
        for name, _ in parameters:
            text = LaunchConfiguration(name).perform(context)
            if text != '':
                rules += ['-p', f'{name}:={text}']
        # The params file goes in the same argument list, before the rules:
        # rcl and the node apply parameters in command-line order, and
        # launch_ros would put a `parameters` file after these arguments,
        # where its defaults would override the rules.
        params_file = LaunchConfiguration('params_file').perform(context)
        node_class = LifecycleNode if executable in LIFECYCLE_EXECUTABLES else Node
        node = node_class(
            package=PACKAGE,
            executable=executable,
            name=LaunchConfiguration('node_name'),
            namespace=LaunchConfiguration('namespace'),
            arguments=[
                '--ros-args',
                '--log-level',
                LaunchConfiguration('log_level'),
                '--params-file',
                params_file,
            ]
            + rules,
            output='screen',
            emulate_tty=True,
            # On SIGINT the node shuts down (see its launch file) and exits;
            # if that takes longer than its shutdown_grace parameter, it
            # exits at once. The SIGTERM sent after sigterm_timeout counts
            # as a second signal.
            sigterm_timeout='10',
        )
        return [
            node,
            RegisterEventHandler(OnProcessExit(target_action=node, on_exit=fail_on_error_exit)),
        ]

    share = get_package_share_directory(PACKAGE)
    args = [
        DeclareLaunchArgument(
            'params_file',
            default_value=os.path.join(share, 'launch', params_yaml),
            description='ROS 2 params file read before the parameter arguments',
        ),
        DeclareLaunchArgument(
            'node_name', default_value=node_name, description='name of the node'
        ),
        DeclareLaunchArgument('namespace', default_value='', description='namespace of the node'),
        DeclareLaunchArgument(
            'log_level', default_value='info', description='debug, info, warn, error or fatal'
        ),
    ]
    args += [
        DeclareLaunchArgument(name, default_value='', description=doc) for name, doc in parameters
    ]
    return LaunchDescription(args + [OpaqueFunction(function=launch_node)])
