#!/usr/bin/env bash
# The ROS step of .ci/run: for every prebuilt ROS 2 tree in ../shared/ros (beside the clone),
# unpacked outside the repository:
#  - install its run-time Debian packages (the list in ../shared/ros/README.md) and colcon;
#  - colcon-build this package against it;
#  - go vet, staticcheck and go test of node/rosnode with the rclgo tag (ros/rosgo.sh sets the
#    cgo flags from the tree);
#  - colcon test (the ament linters where the tree has them, the launch tests);
#  - .ci/ros-e2e.sh on each middleware of the tree (Humble: Fast DDS and Cyclone DDS; Jazzy:
#    Cyclone DDS, the only one in that tree), one after the other, each on its own domain id;
#  - the SROS2 check (launch/security/check_sros2.sh) on Cyclone DDS, a third domain id: the
#    nodes as launched by default, then with kv_transport:=shm, actions.* set and the executor on
#    robot_action_chunk, under Enforce; then the real world model under its enclave fed by
#    golden/imagebag, and refused under another enclave or keystore.
# Timeouts: 900 s per ros-e2e.sh run (about 220 s measured at load 10: steps 9 and 10 launch the
# whole policy and restart the world model) and 480 s for the SROS2 check (173-188 s at load 10).
# Without a tree it prints why it skips and exits 0. Any failure exits non-zero.
# FASTWAM_ROS_TREES (space-separated .tar.zst files) overrides the search; FASTWAM_ROS_DOMAIN
# (default 65) is the first of the three domain ids used.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

shopt -s nullglob
trees=(${FASTWAM_ROS_TREES:-../shared/ros/*.tar.zst})
if [ ${#trees[@]} = 0 ]; then
  echo "SKIP: ROS 2 tests: no ROS 2 tree in ../shared/ros (see .ci/ros.sh)"
  exit 0
fi
domain=${FASTWAM_ROS_DOMAIN:-65}

apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }
# Run-time packages of the trees (../shared/ros/README.md), colcon's pieces (RECIPE.md section 1)
# and the linters' Python modules (flake8 with ament's plugins, pydocstyle).
pkgs=(libddsc0debian cyclonedds-tools libiceoryx-binding-c2 libspdlog1.10 libfmt9 libtinyxml2-9 libyaml-cpp0.7
  libyaml-0-2 libconsole-bridge1.0 libfoonathan-memory0.7.2 libsqlite3-0 libzstd1 liblz4-1 libssl3 libacl1
  libpython3.11 liblttng-ust1 python3-yaml python3-numpy python3-lark python3-empy python3-catkin-pkg
  python3-netifaces python3-psutil python3-packaging python3-argcomplete python3-cryptography python3-lxml
  python3-openssl cmake g++ colcon python3-colcon-core python3-colcon-cmake python3-colcon-ros
  python3-colcon-bash python3-colcon-library-path python3-colcon-package-selection
  python3-colcon-parallel-executor python3-colcon-output python3-colcon-defaults python3-colcon-metadata
  python3-colcon-pkg-config python3-colcon-python-setup-py python3-colcon-recursive-crawl
  python3-colcon-package-information python3-colcon-test-result python3-osrf-pycommon python3-pytest
  libxml2-utils python3-flake8 python3-pydocstyle python3-flake8-builtins python3-flake8-comprehensions
  python3-flake8-docstrings python3-flake8-import-order python3-flake8-quotes)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "+ apt-get install ${missing[*]}"
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

scratch=$(mktemp -d /tmp/fastwam-ros-ci.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
# pyenv's python would shadow Debian's, which colcon, rosidl and the trees' Python packages use.
export PATH="/usr/bin:$PATH"
status=0
for tree in "${trees[@]}"; do
  name=$(basename "$tree" .tar.zst)
  t0=$SECONDS
  printf '\n=== ROS 2 tree %s\n' "$name"
  root=$scratch/$name
  mkdir -p "$root/ws/src"
  tar -C "$root" --zstd -xf "$tree"
  setup=$(ls "$root"/*/setup.bash | head -1)
  ln -s "$repo" "$root/ws/src/fastwam_action_expert"
  # Each tree in a subshell, so its environment does not leak into the next. Not as an if
  # condition: bash ignores set -e in a subshell run there, and a failing step would go unseen.
  set +e
  (
    set -e
    # ROS's setup scripts are not written for set -u (or -e).
    set +eu
    # shellcheck disable=SC1090
    source "$setup"
    set -eu
    # The shared Jazzy tree's setup sets no ROS_DISTRO (no ros_environment): the file name says it.
    export ROS_DISTRO=${ROS_DISTRO:-$(echo "$name" | cut -d- -f2)}
    echo "+ ROS_DISTRO=$ROS_DISTRO, from $setup"
    cd "$root/ws"
    echo "+ colcon build"
    colcon build --packages-select fastwam_action_expert --event-handlers console_cohesion- \
      --cmake-args -DPYTHON_EXECUTABLE=/usr/bin/python3 -DPython3_EXECUTABLE=/usr/bin/python3 >"$root/build.log" 2>&1 ||
      { tail -40 "$root/build.log"; echo "FAIL: colcon build against $name"; exit 1; }
    echo "PASS: colcon build against $name ($((SECONDS - t0)) s so far)"
    set +eu
    # shellcheck disable=SC1091
    source install/setup.bash
    set -eu
    cd "$repo"
    echo "+ go vet -tags rclgo ./..."
    ros/rosgo.sh go vet -tags rclgo ./...
    echo "+ go tool staticcheck -tags rclgo ./..."
    ros/rosgo.sh go tool staticcheck -tags rclgo ./...
    echo "+ go test -tags rclgo ./node/rosnode/..."
    ros/rosgo.sh go test -count=1 -tags rclgo ./node/rosnode/...
    echo "PASS: rclgo vet, staticcheck and tests against $name"
    cd "$root/ws"
    echo "+ colcon test"
    export ROS_DOMAIN_ID=$domain
    colcon test --packages-select fastwam_action_expert --event-handlers console_cohesion- >"$root/test.log" 2>&1 || true
    if colcon test-result --verbose --test-result-base build/fastwam_action_expert; then
      echo "PASS: colcon test against $name"
    else
      tail -40 "$root/test.log"
      echo "FAIL: colcon test against $name"
      exit 1
    fi
    cd "$repo"
    case "$ROS_DISTRO" in
      humble) rmws="rmw_fastrtps_cpp rmw_cyclonedds_cpp" ;;
      *) rmws="rmw_cyclonedds_cpp" ;;
    esac
    fails=0
    for rmw in $rmws; do
      case "$rmw" in rmw_fastrtps_cpp) d=$domain ;; *) d=$((domain + 1)) ;; esac
      ros2 daemon stop >/dev/null 2>&1 || true
      RMW_IMPLEMENTATION=$rmw ROS_DOMAIN_ID=$d timeout -k 10 900 .ci/ros-e2e.sh || fails=$((fails + 1))
    done
    # SROS2 (issue 17): under ROS_SECURITY_STRATEGY=Enforce on Cyclone DDS, the world model's
    # enclave gets chunks through, publishers without the grant get nothing to the node.
    ros2 daemon stop >/dev/null 2>&1 || true
    if RMW_IMPLEMENTATION=rmw_cyclonedds_cpp ROS_DOMAIN_ID=$((domain + 2)) timeout -k 10 480 \
      launch/security/check_sros2.sh; then
      echo "PASS: SROS2 check (Enforce, Cyclone DDS) on $name"
    else
      echo "FAIL: SROS2 check (Enforce, Cyclone DDS) on $name"
      fails=$((fails + 1))
    fi
    ros2 daemon stop >/dev/null 2>&1 || true
    [ "$fails" = 0 ]
  )
  rc=$?
  set -e
  if [ "$rc" != 0 ]; then
    echo "FAIL: ROS 2 tree $name"
    status=1
  fi
  echo "--- $name: $((SECONDS - t0)) s"
done
exit $status
