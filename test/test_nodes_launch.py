"""
Launch test: the action expert and the executor start and their topics flow.

Run by `colcon test` (add_launch_test in CMakeLists.txt). The action expert
starts through its launch file with the CPU backend and the tiny model of
golden/tiny (autostart), the executor through its own, and kv_player feeds
the golden inputs. The test checks that the action expert reaches the
lifecycle state active, that ActionChunk messages arrive on /action_chunk,
and that the executor publishes StampedAction messages on /action.
"""

import os
import time
import unittest

from ament_index_python.packages import get_package_prefix, get_package_share_directory
from launch import LaunchDescription
from launch.actions import ExecuteProcess, GroupAction, IncludeLaunchDescription, TimerAction
from launch.launch_description_sources import PythonLaunchDescriptionSource
import launch_testing
import launch_testing.actions
from lifecycle_msgs.srv import GetState
import pytest
import rclpy

from fastwam_action_expert.msg import ActionChunk, StampedAction

PACKAGE = 'fastwam_action_expert'
TINY = os.path.join(os.path.dirname(os.path.realpath(__file__)), '..', 'golden', 'tiny')


@pytest.mark.launch_test
def generate_test_description():
    """Start both nodes and, after a few seconds, kv_player."""
    share = get_package_share_directory(PACKAGE)
    expert = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, 'launch', 'action_expert.launch.py')),
        launch_arguments={
            'backend': 'cpu',
            'cpu.weights': os.path.join(TINY, 'weights.safetensors'),
            'cpu.video_tokens': '8',
            'cpu.context_tokens': '5',
            'self_test.golden': os.path.join(TINY, 'case_all.npz'),
        }.items())
    executor = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, 'launch', 'executor.launch.py')))
    player = os.path.join(get_package_prefix(PACKAGE), 'lib', PACKAGE, 'kv_player')
    feed = TimerAction(period=5.0, actions=[ExecuteProcess(
        cmd=[player, os.path.join(TINY, 'case_all.npz'), '--rate', '2', '--count', '20'],
        output='screen')])
    # Each include in its own scope: both declare params_file and node_name.
    return LaunchDescription([
        GroupAction([expert], scoped=True), GroupAction([executor], scoped=True),
        feed, launch_testing.actions.ReadyToTest()])


class TestNodes(unittest.TestCase):
    """The running nodes, seen from an rclpy node."""

    @classmethod
    def setUpClass(cls):
        """Create the rclpy node of the checks."""
        rclpy.init()
        cls.node = rclpy.create_node('fastwam_launch_test')

    @classmethod
    def tearDownClass(cls):
        """Destroy the rclpy node."""
        cls.node.destroy_node()
        rclpy.shutdown()

    def wait_for(self, done, seconds):
        """Spin until done() is true or seconds pass; return done()."""
        end = time.monotonic() + seconds
        while time.monotonic() < end and not done():
            rclpy.spin_once(self.node, timeout_sec=0.1)
        return done()

    def test_expert_active(self):
        """The action expert autostarts to the lifecycle state active."""
        client = self.node.create_client(GetState, '/fastwam_action_expert/get_state')
        self.assertTrue(client.wait_for_service(timeout_sec=60.0), 'no get_state service')
        label = ''
        end = time.monotonic() + 60.0
        while time.monotonic() < end and label != 'active':
            future = client.call_async(GetState.Request())
            rclpy.spin_until_future_complete(self.node, future, timeout_sec=5.0)
            if future.result() is not None:
                label = future.result().current_state.label
            time.sleep(0.5)
        self.assertEqual(label, 'active')

    def test_chunks_and_actions_flow(self):
        """kv_player's inputs give chunks, and the executor executes them."""
        chunks, actions = [], []
        self.node.create_subscription(ActionChunk, '/action_chunk', chunks.append, 10)
        self.node.create_subscription(StampedAction, '/action', actions.append, 10)
        self.assertTrue(self.wait_for(lambda: len(chunks) >= 2, 90.0),
                        f'{len(chunks)} ActionChunk messages on /action_chunk')
        self.assertTrue(self.wait_for(lambda: len(actions) >= 20, 30.0),
                        f'{len(actions)} StampedAction messages on /action')


@launch_testing.post_shutdown_test()
class TestExit(unittest.TestCase):
    """After SIGINT from launch_testing."""

    def test_exit_codes(self, proc_info):
        """Both nodes exit with status 0 (kv_player may be stopped mid-run)."""
        for name in proc_info.process_names():
            if not name.startswith('kv_player'):
                launch_testing.asserts.assertExitCodes(proc_info, process=name)
