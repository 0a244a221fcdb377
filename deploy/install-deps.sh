#!/bin/sh
# Installs the Debian packages Kiyot builds and tests with. Idempotent and quick when all are
# present: apt-get runs only for what is missing.
set -e
PKGS="build-essential pkg-config libgrpc-dev protobuf-c-compiler libprotobuf-c-dev
protobuf-compiler libcurl4-openssl-dev libjansson-dev libssl-dev libcmocka-dev libsqlite3-dev
libarchive-dev libyaml-dev libxml2-dev zlib1g-dev libwslay-dev crun runc docker-registry python3 python3-grpcio
python3-protobuf python3-yaml python3-botocore awscli iproute2 iptables busybox-static curl procps psmisc
containerd containernetworking-plugins
python3-kubernetes python3-websocket python3-ruamel.yaml python3-cryptography
clang libclang-rt-dev gcovr stress-ng libnetfilter-queue-dev prometheus"
# the cell image kit (deploy/cell-image): build.sh (systemd-boot comes from the image's own
# packages) and booting the image (smoke.sh, the VM test: QEMU with OVMF, TCG)
CELL_IMAGE_PKGS="mmdebstrap mtools dosfstools e2fsprogs fdisk binutils ovmf
qemu-system-x86 qemu-utils openssl"
missing=""
for p in $PKGS $CELL_IMAGE_PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
# kubectl for the Cell CRD tests: Debian's kubernetes-client, unless a kubectl is installed
# already (kubectl packages all ship /usr/bin/kubectl)
command -v kubectl >/dev/null 2>&1 || missing="$missing kubernetes-client"
[ -z "$missing" ] && exit 0
echo "installing:$missing"
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: run as root (apt-get needs it), or install:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing >/dev/null
