"""Tests of the launch files' argument check (launching.py), without ROS."""

import os
import sys
import types
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))


def _stub_launch_modules():
    """Just enough of launch, launch_ros and ament_index_python to import launching."""
    stubs = {}
    for name, attrs in {
        'ament_index_python': (),
        'ament_index_python.packages': ('get_package_share_directory',),
        'launch': ('LaunchDescription',),
        'launch.actions': ('DeclareLaunchArgument', 'OpaqueFunction', 'RegisterEventHandler'),
        'launch.event_handlers': ('OnProcessExit',),
        'launch.substitutions': ('LaunchConfiguration',),
        'launch_ros': (),
        'launch_ros.actions': ('LifecycleNode', 'Node'),
    }.items():
        m = types.ModuleType(name)
        for a in attrs:
            setattr(m, a, mock.MagicMock(name=f'{name}.{a}'))
        stubs[name] = m
    return stubs


with mock.patch.dict(sys.modules, _stub_launch_modules()):
    from fastwam_action_expert import launching as L  # noqa: E402

DECLARED = ['params_file', 'node_name', 'namespace', 'log_level', 'steps', 'cpu.weights']
FILES = L.launch_files('action_expert.params.yaml')


class CheckArgumentsTest(unittest.TestCase):

    def test_files(self):
        self.assertEqual(FILES, ('action_expert.launch.py', 'action_expert.launch.xml'))

    def test_declared_pass(self):
        for command in (
            ['ros2', 'launch', 'fastwam_action_expert', 'action_expert.launch.py', 'steps:=8'],
            ['ros2', 'launch', '/opt/x/share/launch/action_expert.launch.xml', 'steps:=8'],
        ):
            L.check_arguments(['steps:=8', 'cpu.weights:=/w'], command, FILES, DECLARED)

    def test_undeclared_refused(self):
        for command in (
            ['ros2', 'launch', 'fastwam_action_expert', 'action_expert.launch.py', 'step:=8'],
            ['ros2', 'launch', 'fastwam_action_expert', 'action_expert.launch.xml', 'step:=8'],
        ):
            with self.assertRaises(L.UndeclaredArgument) as e:
                L.check_arguments(['step:=8', 'cpu.weights:=/w'], command, FILES, DECLARED)
            msg = str(e.exception)
            self.assertIn('launch argument(s) step not declared by action_expert.launch.py', msg)
            self.assertIn('step: did you mean steps?', msg)
            self.assertIn('the declared arguments are: params_file, node_name', msg)

    def test_value_with_separator(self):
        with self.assertRaises(L.UndeclaredArgument) as e:
            L.check_arguments(['bogus:=a:=b'], ['ros2', 'launch', 'p', 'action_expert.launch.py'],
                              FILES, DECLARED)
        self.assertIn('argument(s) bogus not declared', str(e.exception))

    def test_other_launch_file_not_judged(self):
        # A robot's bringup that includes ours declares arguments of its own.
        L.check_arguments(['robot:=a'], ['ros2', 'launch', 'my_robot', 'bringup.launch.py'],
                          FILES, DECLARED)
        # The executor's check is not the action expert's.
        L.check_arguments(['step:=8'], ['ros2', 'launch', 'p', 'executor.launch.py'],
                          FILES, DECLARED)


if __name__ == '__main__':
    unittest.main()
