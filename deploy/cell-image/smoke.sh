#!/bin/sh
# smoke.sh IMAGE [--with-imds] [--timeout SECONDS] [--keep DIR]: boots the cell image in QEMU
# (TCG, no KVM) with OVMF's UEFI firmware and checks that it reaches cell-agent: exits 0 once
# the serial console shows the agent asking the instance metadata service at 169.254.169.254
# (there is none here, so the agent keeps retrying: the expected state of this test), 1 when
# it does not within the timeout (default 600 s), printing the console's tail. Prints the time
# from the VM's start to the agent's first attempt.
#
# --with-imds: a stand-in metadata service (imds-conn.py, IMDSv2) answers at
# 169.254.169.254:80 with a bootstrap document for a cell "smoke" (a throw-away CA, no kiyot):
# the test then passes once the agent, past its bootstrap, waits on the VM's DHCP address for
# kiyot to enroll it, and prints the time to that.
#
# The image itself is not written: the VM boots a copy-on-write overlay 1 GiB larger than the
# image, so the boot also grows the root partition and file system, which the console shows.
# The VM's network is QEMU's user-mode network with restrict=on: DHCP answers, nothing leaves.
set -eu

die() {
	echo "smoke.sh: $*" >&2
	exit 2
}

KIT=$(cd "$(dirname "$0")" && pwd)
IMAGE=
TIMEOUT=600
KEEP=
WITH_IMDS=
while [ $# -gt 0 ]; do
	case "$1" in
	--timeout) TIMEOUT=${2:?}; shift 2 ;;
	--keep) KEEP=${2:?}; shift 2 ;;
	--with-imds) WITH_IMDS=1; shift ;;
	-*) die "unknown option $1; usage: smoke.sh IMAGE [--with-imds] [--timeout SECONDS] [--keep DIR]" ;;
	*) IMAGE=$1; shift ;;
	esac
done
[ -n "$IMAGE" ] || die "usage: smoke.sh IMAGE [--with-imds] [--timeout SECONDS] [--keep DIR]"
[ -f "$IMAGE" ] || die "no image at $IMAGE: build one with deploy/cell-image/build.sh"
OVMF_CODE=/usr/share/OVMF/OVMF_CODE.fd
OVMF_VARS=/usr/share/OVMF/OVMF_VARS.fd
[ -f "$OVMF_CODE" ] || die "no OVMF firmware in /usr/share/OVMF: apt-get install ovmf"
[ -f "$OVMF_VARS" ] || die "no OVMF firmware in /usr/share/OVMF: apt-get install ovmf"
for tool in qemu-system-x86_64 qemu-img; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is missing: apt-get install qemu-system-x86 qemu-utils"
done

DIR=$(mktemp -d "${TMPDIR:-/tmp}/cell-smoke.XXXXXX")
QEMU_PID=
# shellcheck disable=SC2317 # (run by the trap)
cleanup() {
	[ -z "$QEMU_PID" ] || kill "$QEMU_PID" 2>/dev/null || true
	[ -z "$QEMU_PID" ] || wait "$QEMU_PID" 2>/dev/null || true
	if [ -n "$KEEP" ]; then
		mkdir -p "$KEEP"
		cp "$DIR/console.log" "$KEEP/" 2>/dev/null || true
	fi
	rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cp "$OVMF_VARS" "$DIR/vars.fd"
IMAGE_ABS=$(cd "$(dirname "$IMAGE")" && pwd)/$(basename "$IMAGE")
qemu-img create -q -f qcow2 -b "$IMAGE_ABS" -F raw "$DIR/disk.qcow2" ||
	die "qemu-img could not make an overlay of $IMAGE"
SIZE=$(stat -c %s "$IMAGE")
qemu-img resize -q "$DIR/disk.qcow2" $((SIZE + 1024 * 1024 * 1024))
: >"$DIR/console.log"

# the VM's network: QEMU's user-mode network. Without --with-imds it is restricted (DHCP
# answers without a gateway; nothing leaves), so 169.254.169.254 is unreachable. With it, the
# VM's network is 169.254.0.0/16 and its connections to 169.254.169.254:80 go to
# imds-conn.py.
NIC=user,model=virtio-net-pci,restrict=on
WANT="instance metadata service at 169.254.169.254"
if [ -n "$WITH_IMDS" ]; then
	command -v python3 >/dev/null 2>&1 || die "--with-imds needs python3"
	command -v openssl >/dev/null 2>&1 || die "--with-imds needs openssl (for a throw-away CA)"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
		-subj /CN=smoke-ca -keyout "$DIR/ca.key" -out "$DIR/ca.pem" 2>/dev/null ||
		die "openssl could not make a CA"
	python3 - "$DIR/ca.pem" >"$DIR/user-data.json" <<'EOF_PY'
import json, sys
print(json.dumps({"version": 1, "cell_id": "smoke", "cluster_id": "smoke",
                  "pod": {"uid": "smoke-uid", "name": "smoke", "namespace": "default"},
                  "ca": open(sys.argv[1]).read(), "enroll_secret": "00" * 16}))
EOF_PY
	# (QEMU forwards only addresses of its own network: the VM's is 169.254.0.0/16 here)
	NIC="user,model=virtio-net-pci,net=169.254.0.0/16,host=169.254.169.1,dhcpstart=169.254.169.100"
	NIC="$NIC,guestfwd=tcp:169.254.169.254:80-cmd:python3 $KIT/imds-conn.py $DIR/user-data.json"
	WANT="for kiyot to enroll it"
fi

START=$(date +%s%N)
qemu-system-x86_64 -machine q35 -accel tcg -m 1024 -smp 2 \
	-drive if=pflash,format=raw,readonly=on,file="$OVMF_CODE" \
	-drive if=pflash,format=raw,file="$DIR/vars.fd" \
	-drive file="$DIR/disk.qcow2",format=qcow2,if=virtio \
	-nic "$NIC" \
	-nographic -monitor none -serial file:"$DIR/console.log" </dev/null >"$DIR/qemu.out" 2>&1 &
QEMU_PID=$!

ms_since_start() { echo $((($(date +%s%N) - START) / 1000000)); }
AGENT_MS=
IMDS_MS=
while :; do
	if ! kill -0 "$QEMU_PID" 2>/dev/null; then
		QEMU_PID=
		echo "smoke.sh: QEMU exited:" >&2
		cat "$DIR/qemu.out" >&2
		tail -n 40 "$DIR/console.log" >&2
		exit 1
	fi
	if [ -z "$AGENT_MS" ] && grep -q "Started.*Kiyot cell agent" "$DIR/console.log"; then
		AGENT_MS=$(ms_since_start)
	fi
	if grep -q "$WANT" "$DIR/console.log"; then
		IMDS_MS=$(ms_since_start)
		break
	fi
	if [ "$(ms_since_start)" -gt $((TIMEOUT * 1000)) ]; then
		echo "smoke.sh: no \"$WANT\" from cell-agent on the console within $TIMEOUT s; its tail:" >&2
		tail -n 60 "$DIR/console.log" >&2
		exit 1
	fi
	sleep 1
done
sleep 3 # the first failure's line, for the record below
echo "smoke.sh: the console shows cell-agent reaching for the instance metadata service:"
grep -a "cell-agent\|Kiyot cell agent\|growfs@\|resized filesystem" "$DIR/console.log" | head -n 12 | sed 's/^/  /'
echo "smoke.sh: VM start to cell-agent.service started: $(awk -v ms="${AGENT_MS:-0}" 'BEGIN {printf "%.1f", ms / 1000}') s (TCG, no KVM)"
if [ -n "$WITH_IMDS" ]; then
	echo "smoke.sh: VM start to the agent waiting for enrollment: $(awk -v ms="$IMDS_MS" 'BEGIN {printf "%.1f", ms / 1000}') s"
else
	echo "smoke.sh: VM start to the agent's first metadata request: $(awk -v ms="$IMDS_MS" 'BEGIN {printf "%.1f", ms / 1000}') s"
fi
exit 0
