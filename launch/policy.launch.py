"""
Launch the whole Fast-WAM policy of package fastwam_action_expert.

Three nodes from one params file: the world model (fastwam_world_model:
cameras, proprio and instruction in, the K/V cache and context out), the
action expert (fastwam_node: the cache and context in, action chunks out)
and the chunk executor (fastwam_executor: one action per control period).
params_file (default: the installed policy.params.yaml) holds one section
per node, keyed /**/<node name> so that it applies in any namespace, with
the LIBERO post-processing preset; copy it and set the model files:

    ros2 launch fastwam_action_expert policy.launch.py \
        params_file:=/robot/policy.params.yaml namespace:=arm2

namespace puts the three nodes and their relative topics under it (a
second arm runs a second launch with another namespace). Each node runs in
its own SROS2 enclave, <enclave_prefix>/world_model, /action_expert and
/executor (launch/security/policy.xml), which matters only when
ROS_SECURITY_ENABLE is true. use_sim_time:=true puts all three on /clock.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, GroupAction, IncludeLaunchDescription
from launch.actions import SetEnvironmentVariable
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration

from fastwam_action_expert.launching import PACKAGE

# The nodes: (launch file, node name, enclave under enclave_prefix).
NODES = [
    ('world_model.launch.py', 'fastwam_world_model', 'world_model'),
    ('action_expert.launch.py', 'fastwam_action_expert', 'action_expert'),
    ('executor.launch.py', 'fastwam_executor', 'executor'),
]


def generate_launch_description():
    share = get_package_share_directory(PACKAGE)
    args = [
        DeclareLaunchArgument(
            'params_file',
            default_value=os.path.join(share, 'launch', 'policy.params.yaml'),
            description='ROS 2 params file of the three nodes (a /**/<node name> section each)',
        ),
        DeclareLaunchArgument('namespace', default_value='', description='namespace of the nodes'),
        DeclareLaunchArgument(
            'log_level', default_value='info', description='debug, info, warn, error or fatal'
        ),
        DeclareLaunchArgument(
            'use_sim_time', default_value='', description='true: every node on /clock'
        ),
        DeclareLaunchArgument(
            'enclave_prefix',
            default_value='/fastwam',
            description='SROS2 enclaves of the nodes: <prefix>/world_model, /action_expert, '
            '/executor',
        ),
    ]
    groups = []
    for launch_file, node_name, enclave in NODES:
        include = IncludeLaunchDescription(
            PythonLaunchDescriptionSource(os.path.join(share, 'launch', launch_file)),
            launch_arguments={
                'params_file': LaunchConfiguration('params_file'),
                'namespace': LaunchConfiguration('namespace'),
                'node_name': node_name,
                'log_level': LaunchConfiguration('log_level'),
                'use_sim_time': LaunchConfiguration('use_sim_time'),
            }.items(),
        )
        groups.append(
            GroupAction(
                [
                    SetEnvironmentVariable(
                        'ROS_SECURITY_ENCLAVE_OVERRIDE',
                        [LaunchConfiguration('enclave_prefix'), '/' + enclave],
                    ),
                    include,
                ],
                scoped=True,
            )
        )
    return LaunchDescription(args + groups)
