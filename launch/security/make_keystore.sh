#!/bin/sh
# Make an SROS2 keystore for package fastwam_action_expert from its policy:
#
#   make_keystore.sh KEYSTORE [POLICY]
#
# KEYSTORE is a folder that must not exist yet; POLICY defaults to policy.xml
# beside this script (installed as share/fastwam_action_expert/launch/security/
# policy.xml). A sourced ROS 2 install with sros2 is needed, and ROS_DOMAIN_ID
# set to the robot's domain: the governance and the permissions are signed for
# that one domain. Every enclave of the policy gets its key, certificate and
# signed permissions. The keystore's private/ folder holds the CA keys: keep it
# off the robot (and out of any repository); the nodes need only public/ and
# their own enclaves/ folder. See docs/ros2.md#sros2.
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 KEYSTORE [POLICY]" >&2
	exit 2
fi
keystore=$1
policy=${2:-$(dirname "$0")/policy.xml}
if [ -e "$keystore" ]; then
	echo "$0: $keystore exists; give a new folder (an existing keystore would keep its old CA and permissions)" >&2
	exit 1
fi
if [ ! -f "$policy" ]; then
	echo "$0: policy $policy is not a file" >&2
	exit 1
fi
if ! command -v ros2 >/dev/null 2>&1; then
	echo "$0: ros2 is not on the PATH; source a ROS 2 install (setup.bash) first" >&2
	exit 1
fi
enclaves=$(sed -n 's/.*<enclave path="\([^"]*\)".*/\1/p' "$policy")
if [ -z "$enclaves" ]; then
	echo "$0: $policy names no <enclave path=\"...\">" >&2
	exit 1
fi
echo "keystore $keystore for ROS_DOMAIN_ID ${ROS_DOMAIN_ID:-0}, policy $policy"
ros2 security create_keystore "$keystore"
for e in $enclaves; do
	# create_enclave signs an allow-everything permission; create_permission
	# replaces it with the policy's grant for the enclave.
	ros2 security create_enclave "$keystore" "$e"
	ros2 security create_permission "$keystore" "$e" "$policy"
	echo "enclave $e"
done
