#!/bin/bash
# The main job, end to end on this machine: a registry on the cell bridge with images built
# here, kiyot serving CRI v1, a pod run through the CRI in a local cell, curled, its logs and
# its cell shown, then deleted. Cleans up after itself, also on failure.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KIYOT_BUILD:-$REPO/build}
WORK=$(mktemp -d /tmp/kiyot-demo-XXXXXX)
BRIDGE=kiyot0
HOST_IP=10.77.0.1
export KIYOT_SOCKET=$WORK/kiyot.sock KIYOT_STATE_DIR=$WORK/state
KIYOT="$BUILD/kiyot"
PY=/usr/bin/python3
pids=()

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

cleanup() {
	set +e
	"$KIYOT" delete pod hello >/dev/null 2>&1
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	# cells outlive kiyot by design; the demo's state dir is its own, so remove them too
	for ns in $(ip netns list 2>/dev/null | awk '/^kiyot-/{print $1}'); do
		[ -d "$WORK/state/cells/${ns#kiyot-}" ] && ip netns delete "$ns"
	done
	if [ -z "${KEEP_BRIDGE:-}" ] && [ -n "${made_bridge:-}" ]; then
		ip link delete "$BRIDGE" 2>/dev/null
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

if ip link show master "$BRIDGE" 2>/dev/null | grep -q ' kv'; then
	echo "demo: another kiyot's cells are on bridge $BRIDGE; stop it first" >&2
	exit 1
fi

step "build the demo images (a static HTTP server, busybox) and start a registry on $HOST_IP:5000"
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
	ip link add "$BRIDGE" type bridge
	made_bridge=1
fi
ip addr replace "$HOST_IP/16" dev "$BRIDGE"
ip link set "$BRIDGE" up
cat >"$WORK/registry.yml" <<YML
version: 0.1
log: { level: error }
storage: { filesystem: { rootdirectory: $WORK/registry }, delete: { enabled: true } }
http: { addr: $HOST_IP:5000 }
YML
docker-registry serve "$WORK/registry.yml" >"$WORK/registry.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do curl -sf "http://$HOST_IP:5000/v2/" >/dev/null && break; sleep 0.1; done
images=/var/tmp/kiyot-demo-images
$PY "$REPO/test/images/build.py" build "$images" >/dev/null
$PY "$REPO/test/images/build.py" push "$images" "$HOST_IP:5000" >/dev/null
echo "pushed: $(curl -s "http://$HOST_IP:5000/v2/_catalog")"

step "start kiyot (CRI v1 on $KIYOT_SOCKET; cells on $BRIDGE, $HOST_IP/16)"
cat >"$WORK/kiyot.yaml" <<YML
socket: $KIYOT_SOCKET
stateDir: $KIYOT_STATE_DIR
cells:
  bridge: $BRIDGE
  cidr: 10.77.0.0/16
  agent: $BUILD/cell-agent
registries:
  "$HOST_IP:5000": { insecure: true }
YML
"$KIYOT" serve --config "$WORK/kiyot.yaml" >"$WORK/kiyot.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$KIYOT_SOCKET" ] && break; sleep 0.05; done

step "kiyot run -f deploy/examples/hello.yaml   (RunPodSandbox, PullImage, CreateContainer, StartContainer)"
cat "$REPO/deploy/examples/hello.yaml" | grep -v '^#'
"$KIYOT" run -f "$REPO/deploy/examples/hello.yaml"

step "kiyot get pods"
"$KIYOT" get pods
step "kiyot get cells -o wide   (the cell: the cheapest instance type that fits 250m / 400Mi, and why)"
"$KIYOT" get cells -o wide
ip=$("$KIYOT" get pods | awk '$1 == "hello" {print $5}')

step "curl http://$ip:8080/   (the pod's IP is its cell's)"
curl -sf --max-time 5 "http://$ip:8080/"

step "kiyot logs hello -c setup   (the init container)"
"$KIYOT" logs hello -c setup
step "kiyot logs hello -c web"
"$KIYOT" logs hello -c web

step "kiyot delete pod hello   (the cell is terminated)"
"$KIYOT" delete pod hello
"$KIYOT" get cells
echo
echo "demo: done"
