# Source-tree marker only, so that the tests import fastwam_action_expert.producer from python/
# without ROS. It is not installed: in an install, fastwam_action_expert is the package that
# rosidl_generator_py generates (its own empty __init__.py, msg/), and CMakeLists.txt installs
# producer.py and kv_player.py beside it.
