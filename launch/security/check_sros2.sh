#!/bin/bash
# The SROS2 check of package fastwam_action_expert (docs/ros2.md#sros2):
# with ROS_SECURITY_ENABLE=true and ROS_SECURITY_STRATEGY=Enforce, under a
# keystore made from policy.xml,
#   1. the node, the executor and kv_player, each in its own enclave, work:
#      4 pairs in, 4 chunks out, 4 chunks accepted by the executor, and the
#      operator enclave reads the node's lifecycle state and a parameter;
#   2. the same with every optional topic of the product in use: the node
#      with kv_transport:=shm (kv_player --shm publishes KVHandoff
#      descriptors on video_kv_handoff) and actions.* set (it publishes
#      robot_action_chunk too), the executor on topics.action_chunk:=
#      robot_action_chunk: 4 pairs in, 4 chunks out, 4 accepted;
#   3. publishers without the grant get no input to the node (it publishes
#      0 chunks and rejects or drops nothing): kv_player and `ros2 topic pub`
#      under the operator enclave (not granted the input topics), kv_player
#      without security, and kv_player under a /fastwam/world_model enclave of
#      another keystore (its own CA, the same policy);
#   4. the real world model: fastwam_world_model (tiny world weights) launched
#      under /fastwam/world_model, fed by `ros2 bag play --clock` of
#      golden/imagebag under the same enclave, the action expert under its
#      own turns the image bag's 4 observations into at least 3 chunks, the
#      executor takes them in, and the world model's launch exits 0 on SIGINT;
#   5. a world model without the grant gets nothing through:
#      fastwam_world_model under /fastwam/operator (refused at start), and
#      under the rogue keystore's /fastwam/world_model with the image bag
#      played under that keystore too (not trusted): the node publishes 0
#      chunks.
#
#   check_sros2.sh            # ROS 2 and the package's install sourced
#
# RMW_IMPLEMENTATION must be a middleware with DDS Security (rmw_cyclonedds_cpp
# with Cyclone DDS built with its security plugins, as Debian's 0.10.2 is, or
# rmw_fastrtps_cpp / rmw_fastrtps_dynamic_cpp on Fast DDS built with -DSECURITY=ON);
# the check runs on the ROS_DOMAIN_ID set (0 if none). On a shared machine
# give it a domain of its own. Takes about two and a half minutes (three on a loaded
# machine, within .ci/ros.sh's 480 s); exits 0 when every check
# passes, 1 naming the first that did not.
# Job control: the launches run in their own process groups with SIGINT
# not ignored (a script's background jobs otherwise ignore it), and are
# stopped like a Ctrl-C, by a SIGINT to the group.
set -um
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tiny=$repo/golden/tiny
for f in "$tiny/weights.safetensors" "$tiny/case_all.npz"; do
	[ -f "$f" ] || { echo "check_sros2: $f missing (run from the source tree)" >&2; exit 1; }
done
command -v ros2 >/dev/null || { echo "check_sros2: ros2 not on the PATH; source ROS 2 and the package's install/setup.bash" >&2; exit 1; }
ros2 pkg prefix fastwam_action_expert >/dev/null 2>&1 || { echo "check_sros2: package fastwam_action_expert not found; source its install/setup.bash" >&2; exit 1; }
work=$(mktemp -d /tmp/check_sros2.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -INT -- "-$p" 2>/dev/null; done
	wait 2>/dev/null
	ros2 daemon stop >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check_sros2: FAIL: $*" >&2; exit 1; }
log() { echo "check_sros2: $*"; }

log "RMW_IMPLEMENTATION=${RMW_IMPLEMENTATION:-default} ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-0} ROS_DISTRO=${ROS_DISTRO:-unset}; work folder $work"
"$here/make_keystore.sh" "$work/keystore" >"$work/keystore.log" 2>&1 || { cat "$work/keystore.log" >&2; fail "make_keystore.sh"; }
# The rogue keystore: its own CAs, the same policy, so its world_model enclave
# grants itself the inputs; our nodes must not trust it.
"$here/make_keystore.sh" "$work/rogue" >"$work/rogue.log" 2>&1 || { cat "$work/rogue.log" >&2; fail "make_keystore.sh (rogue)"; }

export ROS_SECURITY_KEYSTORE=$work/keystore ROS_SECURITY_ENABLE=true ROS_SECURITY_STRATEGY=Enforce
unset ROS_SECURITY_ENCLAVE_OVERRIDE
ros2 daemon stop >/dev/null 2>&1

# start_node NAME: the action expert (CPU backend, tiny weights, self-test on)
# under its enclave, and the executor under its own; logs in $work/NAME.*.log.
# The launch arguments in the arrays node_args and executor_args are added.
node_args=()
executor_args=()
start_node() {
	ROS_SECURITY_ENCLAVE_OVERRIDE=/fastwam/action_expert ros2 launch fastwam_action_expert action_expert.launch.py \
		backend:=cpu cpu.weights:="$tiny/weights.safetensors" cpu.video_tokens:=8 cpu.context_tokens:=5 \
		self_test.golden:="$tiny/case_all.npz" "${node_args[@]}" >"$work/$1.node.log" 2>&1 &
	pids+=($!)
	ROS_SECURITY_ENCLAVE_OVERRIDE=/fastwam/executor ros2 launch fastwam_action_expert executor.launch.py \
		"${executor_args[@]}" >"$work/$1.executor.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do
		grep -q 'active: ' "$work/$1.node.log" 2>/dev/null && return 0
		if ! kill -0 "${pids[-1]}" 2>/dev/null || ! kill -0 "${pids[-2]}" 2>/dev/null; then
			cat "$work/$1.node.log" "$work/$1.executor.log" >&2
			fail "$1: a launch exited before the node became active (node: ${node_args[*]}; executor: ${executor_args[*]})"
		fi
		sleep 0.2
	done
	cat "$work/$1.node.log" >&2
	fail "$1: the node did not become active under enclave /fastwam/action_expert"
}
# stop_nodes NAME: SIGINT both launches and wait for their summaries.
stop_nodes() {
	for p in "${pids[@]}"; do kill -INT -- "-$p" 2>/dev/null; done
	wait "${pids[@]}" 2>/dev/null
	pids=()
	node_summary=$(grep -o 'stopped: .*' "$work/$1.node.log" | sed 's/\x1b\[[0-9;]*m//g')
	executor_summary=$(grep -o 'stopped: .*' "$work/$1.executor.log" | sed 's/\x1b\[[0-9;]*m//g')
	log "$1: node $node_summary"
	log "$1: executor $executor_summary"
}
# player ENCLAVE-or-"" LOG [extra env...]: kv_player, 4 pairs at 2 Hz, at
# most 8 s for discovery, with the options in the array player_args.
player_args=()
player() {
	local enclave=$1 out=$2
	shift 2
	env ${enclave:+ROS_SECURITY_ENCLAVE_OVERRIDE=$enclave} "$@" timeout -s INT 20 \
		ros2 run fastwam_action_expert kv_player "$tiny/case_all.npz" --rate 2 --count 4 --wait 8 "${player_args[@]}" >"$out" 2>&1
}

# 1. Allowed.
t0=$SECONDS
start_node allowed
player /fastwam/world_model "$work/allowed.player.log"
rc=$?
[ $rc -eq 0 ] || { cat "$work/allowed.player.log" >&2; fail "kv_player under /fastwam/world_model exited $rc"; }
sleep 1
state=$(ROS_SECURITY_ENCLAVE_OVERRIDE=/fastwam/operator timeout 20 ros2 lifecycle get /fastwam_action_expert 2>/dev/null | tail -1)
steps=$(ROS_SECURITY_ENCLAVE_OVERRIDE=/fastwam/operator timeout 20 ros2 param get /fastwam_action_expert steps 2>/dev/null | tail -1)
ros2 daemon stop >/dev/null 2>&1
log "allowed: operator: lifecycle get: $state; param get steps: $steps"
stop_nodes allowed
case $node_summary in "stopped: 4 chunks published, 0 backend errors, 0 rejected, 0 dropped"*) ;; *) fail "allowed: node: $node_summary, want 4 chunks published, 0 rejected, 0 dropped" ;; esac
case $executor_summary in "stopped: 4 chunks in, 4 accepted, 0 dropped"*) ;; *) fail "allowed: executor: $executor_summary, want 4 chunks in, 4 accepted" ;; esac
case $state in *"active [3]"*) ;; *) fail "allowed: operator's ros2 lifecycle get: $state" ;; esac
case $steps in *"Integer value is: 10"*) ;; *) fail "allowed: operator's ros2 param get steps: $steps" ;; esac

# 2. Allowed, with every optional topic: KVHandoff descriptors on
# video_kv_handoff (kv_transport shm), post-processed chunks on
# robot_action_chunk (actions.*) executed by the executor.
t_allowed=$((SECONDS - t0))
t0=$SECONDS
node_args=(kv_transport:=shm actions.gripper.affine:=true)
executor_args=(topics.action_chunk:=robot_action_chunk)
player_args=(--shm video_kv_handoff)
start_node optional
player /fastwam/world_model "$work/optional.player.log"
rc=$?
[ $rc -eq 0 ] || { cat "$work/optional.player.log" >&2; fail "optional: kv_player --shm under /fastwam/world_model exited $rc"; }
sleep 1
stop_nodes optional
case $node_summary in "stopped: 4 chunks published, 0 backend errors, 0 rejected, 0 dropped"*) ;; *) fail "optional: node (kv_transport:=shm, actions.gripper.affine:=true): $node_summary, want 4 chunks published, 0 rejected, 0 dropped" ;; esac
case $executor_summary in "stopped: 4 chunks in, 4 accepted, 0 dropped"*) ;; *) fail "optional: executor on robot_action_chunk: $executor_summary, want 4 chunks in, 4 accepted" ;; esac
node_args=()
executor_args=()
player_args=()
t_optional=$((SECONDS - t0))
t0=$SECONDS

# 3. Not allowed: every publisher below must get nothing to the node.
start_node denied
player /fastwam/operator "$work/denied.operator.log"
log "denied: kv_player under /fastwam/operator exited $?: $(grep -m1 -io 'error.*\|denied.*\|published seq 0.*\|no subscriber.*' "$work/denied.operator.log" | cut -c1-160)"
ROS_SECURITY_ENCLAVE_OVERRIDE=/fastwam/operator timeout -s INT 10 ros2 topic pub -t 3 -w 0 /video_kv_cache \
	fastwam_action_expert/msg/VideoKVCache '{seq: 1}' >"$work/denied.pub.log" 2>&1
log "denied: ros2 topic pub under /fastwam/operator exited $?: $(grep -m1 -io 'error.*\|denied.*\|publishing #1.*\|failed.*' "$work/denied.pub.log" | cut -c1-160)"
player "" "$work/denied.insecure.log" ROS_SECURITY_ENABLE=false
log "denied: kv_player without security exited $?: $(grep -m1 -io 'error.*\|published seq 0.*' "$work/denied.insecure.log" | cut -c1-160)"
player /fastwam/world_model "$work/denied.rogue.log" ROS_SECURITY_KEYSTORE="$work/rogue"
log "denied: kv_player under the rogue keystore's /fastwam/world_model exited $?: $(grep -m1 -io 'error.*\|published seq 0.*' "$work/denied.rogue.log" | cut -c1-160)"
ros2 daemon stop >/dev/null 2>&1
stop_nodes denied
case $node_summary in "stopped: 0 chunks published, 0 backend errors, 0 rejected, 0 dropped"*) ;; *) fail "denied: node: $node_summary, want 0 chunks published, 0 rejected, 0 dropped" ;; esac
t_denied=$((SECONDS - t0))
t0=$SECONDS

# 4. The real world model: fastwam_world_model (tiny world weights, golden/tiny/world) launched
# under /fastwam/world_model, fed by `ros2 bag play --clock` of golden/imagebag under the same
# enclave (its rosbag2_player profile grants the camera, proprio, instruction and /clock topics);
# the action expert under /fastwam/action_expert turns its caches into chunks for the executor.
# Every node on /clock (the image bag's proprio has no stamp: the world model stamps it with its
# clock, which must be the bag's).
world=$tiny/world
prefix=$(ros2 pkg prefix fastwam_action_expert)
# The bag's first instruction has no entry in the tiny text cache: one is made beside copies of
# the others (as .ci/ros-e2e.sh step 9 does).
mkdir -p "$work/text"
cp "$world"/text/*.text.safetensors "$work/text/"
"$prefix/lib/fastwam_action_expert/fastwam" weights make -model text -task "put the black bowl on the plate" \
	-tokens 15 -seed 4 -encoder "random (fastwam weights make -model text)" -force -o "$work/text" >"$work/text.log" 2>&1 ||
	{ cat "$work/text.log" >&2; fail "world model: fastwam weights make -model text"; }
cat >"$work/world.params.yaml" <<PARAMS
/**/fastwam_world_model:
  ros__parameters:
    model: {dit_weights: "$world/dit.safetensors", vae_weights: "$world/vae.safetensors",
            dataset_stats: "$world/dataset_stats.json", text_cache: "$work/text"}
    image_transports: ["compressed", "raw"]
    sync: {tolerance: 0.1}
    diagnostics: {stale_after: 30.0}
    use_sim_time: true
/**/fastwam_action_expert:
  ros__parameters:
    backend: "cpu"
    cpu: {weights: "$tiny/weights.safetensors", video_tokens: 98, context_tokens: 129}
    self_test: {skip: true}
    max_input_age: 0.0
    use_sim_time: true
/**/fastwam_executor:
  ros__parameters:
    use_sim_time: true
PARAMS
# start_expert NAME: the action expert and the executor on world.params.yaml, each under its
# enclave, the expert active.
start_expert() {
	ROS_SECURITY_ENCLAVE_OVERRIDE=/fastwam/action_expert ros2 launch fastwam_action_expert action_expert.launch.py \
		params_file:="$work/world.params.yaml" >"$work/$1.node.log" 2>&1 &
	pids+=($!)
	ROS_SECURITY_ENCLAVE_OVERRIDE=/fastwam/executor ros2 launch fastwam_action_expert executor.launch.py \
		params_file:="$work/world.params.yaml" >"$work/$1.executor.log" 2>&1 &
	pids+=($!)
	wait_active "${pids[-2]}" "$1.node.log" "$1: the action expert under /fastwam/action_expert"
}
# wait_active PID LOG WHAT: until LOG has the node's "active: " line (20 s); fail when PID, the
# process that writes it, ends first.
wait_active() {
	for _ in $(seq 100); do
		grep -q ']: active: ' "$work/$2" 2>/dev/null && return 0
		kill -0 "$1" 2>/dev/null || break
		sleep 0.2
	done
	cat "$work/$2" >&2
	fail "$3 did not become active"
}
# play_images ENCLAVE LOG [env...]: the image bag (4 observations) on /clock under ENCLAVE.
play_images() {
	local enclave=$1 out=$2
	shift 2
	env ROS_SECURITY_ENCLAVE_OVERRIDE="$enclave" "$@" timeout -s INT 60 \
		ros2 bag play "$repo/golden/imagebag" -d 4 -r 0.2 --clock 200 >"$out" 2>&1
}
start_expert world
ROS_SECURITY_ENCLAVE_OVERRIDE=/fastwam/world_model ros2 launch fastwam_action_expert world_model.launch.py \
	params_file:="$work/world.params.yaml" >"$work/world.wm.log" 2>&1 &
wm_launch=$!
pids+=($wm_launch)
wait_active "$wm_launch" world.wm.log "world: fastwam_world_model under /fastwam/world_model"
play_images /fastwam/world_model "$work/world.play.log" || { cat "$work/world.play.log" >&2; fail "world: ros2 bag play under /fastwam/world_model exited $?"; }
sleep 2
kill -INT -- "-$wm_launch" 2>/dev/null
wait "$wm_launch"
rc=$?
wm_summary=$(grep -o 'stopped: .*' "$work/world.wm.log" | sed 's/\x1b\[[0-9;]*m//g')
log "world: world model $wm_summary (launch exited $rc on SIGINT)"
stop_nodes world
[ $rc -eq 0 ] || fail "world: the world model's launch exited $rc on SIGINT (log $work/world.wm.log)"
world_chunks=$(echo "$node_summary" | sed -n 's/^stopped: \([0-9]*\) chunks published.*/\1/p')
case $wm_summary in "stopped: 0 cycles"* | "") fail "world: the world model published nothing: ${wm_summary:-no summary}" ;; esac
[ "${world_chunks:-0}" -ge 3 ] || fail "world: node: $node_summary, want at least 3 of the image bag's 4 observations as chunks"
case $executor_summary in "stopped: 0 chunks in"* | "") fail "world: executor: ${executor_summary:-no summary}, want the node's chunks in" ;; esac
t_world=$((SECONDS - t0))
t0=$SECONDS

# 5. A world model without the grant gets nothing through: fastwam_world_model under
# /fastwam/operator (granted none of its topics), then under the rogue keystore's
# /fastwam/world_model (granted by a CA the nodes do not trust, its bag played under that
# keystore too); the image bag played each time; the action expert publishes 0 chunks.
start_expert wmdenied
ROS_SECURITY_ENCLAVE_OVERRIDE=/fastwam/operator timeout -s INT 30 "$prefix/lib/fastwam_action_expert/fastwam_world_model" \
	--ros-args --params-file "$work/world.params.yaml" >"$work/wmdenied.operator.log" 2>&1 &
op=$!
sleep 3
play_images /fastwam/world_model "$work/wmdenied.play.log"
kill -INT "$op" 2>/dev/null
wait "$op"
log "wmdenied: fastwam_world_model under /fastwam/operator exited $?: $(sed 's/\x1b\[[0-9;]*m//g' "$work/wmdenied.operator.log" | grep -m1 -io 'error.*\|failed.*\|stopped: .*' | cut -c1-200)"
ROS_SECURITY_KEYSTORE="$work/rogue" ROS_SECURITY_ENCLAVE_OVERRIDE=/fastwam/world_model timeout -s INT 30 \
	"$prefix/lib/fastwam_action_expert/fastwam_world_model" --ros-args --params-file "$work/world.params.yaml" \
	>"$work/wmdenied.rogue.log" 2>&1 &
rogue=$!
for _ in $(seq 50); do grep -q ']: active: ' "$work/wmdenied.rogue.log" 2>/dev/null && break; sleep 0.2; done
play_images /fastwam/world_model "$work/wmdenied.rogueplay.log" ROS_SECURITY_KEYSTORE="$work/rogue"
sleep 1
kill -INT "$rogue" 2>/dev/null
wait "$rogue"
log "wmdenied: fastwam_world_model under the rogue keystore's /fastwam/world_model exited $?: $(sed 's/\x1b\[[0-9;]*m//g' "$work/wmdenied.rogue.log" | grep -o 'stopped: .*' | head -1); $(grep -m1 -o 'error: .*' "$work/wmdenied.rogue.log" | cut -c1-120)"
ros2 daemon stop >/dev/null 2>&1
stop_nodes wmdenied
case $node_summary in "stopped: 0 chunks published, 0 backend errors, 0 rejected, 0 dropped"*) ;; *) fail "wmdenied: node: $node_summary, want 0 chunks published, 0 rejected, 0 dropped" ;; esac
log "phases: allowed ${t_allowed} s, optional topics ${t_optional} s, not allowed ${t_denied} s, world model ${t_world} s, world model not allowed $((SECONDS - t0)) s"
log "PASS: the allowed producer's 4 pairs gave 4 chunks (the executor accepted 4), also with kv_transport:=shm, actions.* set and the executor on robot_action_chunk; the four unauthorised publishers got nothing to the node; the world model under its enclave, fed by the image bag, gave ${world_chunks} chunks; under the operator's enclave and the rogue keystore it got none through"
