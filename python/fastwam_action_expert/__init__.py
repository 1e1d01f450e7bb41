# The package's marker in the source tree and in a pip install of the producer kit
# (python/pyproject.toml):
# the tests import fastwam_action_expert.producer from python/ without ROS.
# colcon does not install this file: in a ROS install, fastwam_action_expert is the package that
# rosidl_generator_py generates (its own empty __init__.py, msg/), and CMakeLists.txt installs
# producer.py, kv_player.py and launching.py beside it.
