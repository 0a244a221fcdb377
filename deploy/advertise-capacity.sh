#!/bin/sh
# advertise-capacity.sh: makes a Kiyot node advertise capacity for Kiyot pods.
#
# Pods in cells use none of the node's CPU or memory, but the scheduler (and the kubelet's
# own admission check) count their requests against the node's capacity, which the kubelet
# takes from the machine it runs on. See deploy/node-capacity.md for the whole story; in short:
#
#   --cells N      (default 1000) advertises the extended resource kiyot.elotl.co/cells=N in
#                  the node's status capacity. The kubelet keeps extended resources it does
#                  not manage (it copies them into allocatable), so this survives the
#                  kubelet's status updates; it is reset when the node object is recreated
#                  or the kubelet loses its device-plugin checkpoint, so run it again after
#                  the kubelet registers (or with --every). Kiyot pods request
#                  kiyot.elotl.co/cells: 1, which also keeps them off nodes without Kiyot.
#   --cpu Q --memory Q
#                  also overwrite cpu and memory capacity and allocatable. The kubelet
#                  rewrites both from the machine at its next status update (every 10 s by
#                  default), so this holds only until then; with --every it is re-applied,
#                  and pods scheduled in between may still be rejected by the kubelet
#                  (OutOfcpu, OutOfmemory). A last resort; see node-capacity.md.
#   --every S      re-apply every S seconds, forever (for a systemd service).
#   --node NAME    the node (default: the host name in lower case, as the kubelet and kiyot
#                  name it).
#
# Needs kubectl 1.24 or later (patch --subresource=status) and credentials allowed to patch
# nodes/status (found as kubectl finds them: $KUBECONFIG or ~/.kube/config). $KUBECTL
# overrides the kubectl command.
set -eu

KUBECTL=${KUBECTL:-kubectl}
node=$(hostname | tr '[:upper:]' '[:lower:]')
cells=1000
cpu=
memory=
every=

usage() {
	sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--node) node=${2:?--node needs a name}; shift 2 ;;
	--cells) cells=${2:?--cells needs a number}; shift 2 ;;
	--cpu) cpu=${2:?--cpu needs a quantity such as 1000}; shift 2 ;;
	--memory) memory=${2:?--memory needs a quantity such as 4Ti}; shift 2 ;;
	--every) every=${2:?--every needs seconds}; shift 2 ;;
	-h|--help) usage ;;
	*) echo "advertise-capacity.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done

case "$cells" in
''|*[!0-9]*) echo "advertise-capacity.sh: --cells $cells: must be a whole number" >&2; exit 2 ;;
esac
if { [ -n "$cpu" ] && [ -z "$memory" ]; } || { [ -z "$cpu" ] && [ -n "$memory" ]; }; then
	echo "advertise-capacity.sh: give --cpu and --memory together" >&2
	exit 2
fi
case "$every" in
0|*[!0-9]*) echo "advertise-capacity.sh: --every $every: must be whole seconds, at least 1" >&2; exit 2 ;;
esac
for q in "$cpu" "$memory"; do
	case "$q" in
	*[!0-9A-Za-z.]*) echo "advertise-capacity.sh: \"$q\" is not a quantity" >&2; exit 2 ;;
	esac
done
if ! "$KUBECTL" patch --help 2>/dev/null | grep -q -- '--subresource'; then
	echo "advertise-capacity.sh: $KUBECTL has no patch --subresource; use kubectl 1.24 or later" >&2
	exit 1
fi

# The merge patch: the extended resource in capacity (the kubelet copies it to allocatable),
# and, when asked, cpu and memory in both.
patch() {
	res="\"kiyot.elotl.co/cells\":\"$cells\""
	if [ -n "$cpu" ]; then
		res="$res,\"cpu\":\"$cpu\",\"memory\":\"$memory\""
		printf '{"status":{"capacity":{%s},"allocatable":{%s}}}' "$res" "$res"
	else
		printf '{"status":{"capacity":{%s}}}' "$res"
	fi
}

apply() {
	"$KUBECTL" patch node "$node" --subresource=status --type=merge -p "$(patch)"
}

if [ -z "$every" ]; then
	apply
	exit 0
fi
[ -n "$cpu" ] && echo "advertise-capacity.sh: note: the kubelet resets cpu and memory at each status update; re-applying every ${every}s" >&2
while :; do
	apply || echo "advertise-capacity.sh: patch of node $node failed; retrying in ${every}s" >&2
	sleep "$every"
done
