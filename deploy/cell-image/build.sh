#!/bin/sh
# build.sh: builds the cell image, a raw GPT disk image that boots by UEFI (EC2's Nitro types,
# QEMU with OVMF) into systemd, takes its address by DHCP and starts cell-agent, which reads
# its bootstrap document from the instance metadata service. See README.md.
#
#	deploy/cell-image/build.sh [--arch amd64|arm64] [--out FILE] [--agent PATH] [--shim PATH]
#	                           [--mirror URL] [--security-mirror URL|none] [--work DIR]
#	                           [--root-only DIR | --root DIR]
#
# --work DIR keeps the build's files there (the root tree, the partitions' images) to look at.
# The image is made in two steps, which may run apart: the root tree (the packages and the
# image's configuration, everything but the agent: the long step) and the image (the agent and
# its shim put in, the partitions made). --root-only DIR makes only the tree, in DIR, without
# needing the agent; --root DIR makes the image from a tree made so (it is copied, not changed),
# so an image with another build of the agent takes seconds.
#
# Debian bookworm packages only (mmdebstrap), run as root. No loop device and no mount of the
# image: the root file system is made from a directory (mkfs.ext4 -d), the EFI system
# partition with mkfs.vfat and mtools, and both are written at their offsets of a file that
# sfdisk partitioned.
set -eu

KIT=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$KIT/../.." && pwd)
ARCH=amd64
OUT=
AGENT=
SHIM=
MIRROR=http://deb.debian.org/debian
SECURITY=http://deb.debian.org/debian-security
WORK=
ROOT_ONLY=
FROM_ROOT=
ESP_MB=128
FREE_MB=256 # room left in the root file system before it grows to the volume

die() {
	echo "build.sh: $*" >&2
	exit 1
}

usage() {
	echo "usage: $0 [--arch amd64|arm64] [--out FILE] [--agent PATH] [--shim PATH] [--mirror URL] [--security-mirror URL|none] [--work DIR] [--root-only DIR | --root DIR]" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--arch) ARCH=${2:?}; shift 2 ;;
	--out) OUT=${2:?}; shift 2 ;;
	--agent) AGENT=${2:?}; shift 2 ;;
	--shim) SHIM=${2:?}; shift 2 ;;
	--mirror) MIRROR=${2:?}; shift 2 ;;
	--security-mirror) SECURITY=${2:?}; shift 2 ;;
	--work) WORK=${2:?}; shift 2 ;;
	--root-only) ROOT_ONLY=${2:?}; shift 2 ;;
	--root) FROM_ROOT=${2:?}; shift 2 ;;
	-h | --help) usage ;;
	*) echo "build.sh: unknown argument $1" >&2; usage ;;
	esac
done

case "$ARCH" in
amd64) EFI_ARCH=x64; EFI_BOOT=BOOTX64.EFI; ROOT_TYPE=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709 ;;
arm64) EFI_ARCH=aa64; EFI_BOOT=BOOTAA64.EFI; ROOT_TYPE=B921B045-1DF0-41C3-AF44-4C6F280D3FAE ;;
*) die "--arch $ARCH: must be amd64 or arm64" ;;
esac
ESP_TYPE=C12A7328-F81F-11D2-BA4B-00A0C93EC93B

[ -z "$ROOT_ONLY" ] || [ -z "$FROM_ROOT" ] || die "--root-only and --root exclude each other"
[ "$(id -u)" = 0 ] || die "run as root: mmdebstrap installs the packages as root and mkfs.ext4 -d keeps their owners"
for tool in mmdebstrap mkfs.ext4 mkfs.vfat mcopy mmd sfdisk objdump; do
	command -v "$tool" >/dev/null 2>&1 ||
		die "$tool is missing: apt-get install mmdebstrap e2fsprogs dosfstools mtools fdisk binutils"
done
if [ -z "$ROOT_ONLY" ]; then
	[ -n "$AGENT" ] || AGENT=$REPO/build/cell-agent
	[ -n "$SHIM" ] || SHIM=$(dirname "$AGENT")/cell-shim
	[ -n "$OUT" ] || OUT=$(dirname "$AGENT")/cell-image-$ARCH.raw
	[ -f "$AGENT" ] || die "no cell-agent at $AGENT: build it (make BUILD=<dir>) or name it with --agent"
	[ -f "$SHIM" ] || die "no cell-shim at $SHIM (it goes beside cell-agent): build it or name it with --shim"
	# the agent must be of the image's architecture
	case "$ARCH:$(objdump -f "$AGENT" | sed -n 's/.*file format //p')" in
	amd64:elf64-x86-64 | arm64:elf64-littleaarch64) ;;
	*) die "$AGENT is not an $ARCH binary ($(objdump -f "$AGENT" | sed -n 's/.*file format //p')): build it for $ARCH or pass --arch" ;;
	esac
	OUT_DIR=$(cd "$(dirname "$OUT")" && pwd) || die "the directory of --out $OUT does not exist"
else
	OUT_DIR=$(cd "$(dirname "$ROOT_ONLY")" && pwd) || die "the directory of --root-only $ROOT_ONLY does not exist"
fi
if [ -n "$FROM_ROOT" ] && { [ ! -d "$FROM_ROOT/root/usr" ] || [ ! -d "$FROM_ROOT/esp" ]; }; then
	die "--root $FROM_ROOT: no root tree there; make one with --root-only $FROM_ROOT"
fi

START=$(date +%s)
KEEP_WORK=1
[ -n "$WORK" ] || { WORK=$(mktemp -d "$OUT_DIR/cell-image-work.XXXXXX") && KEEP_WORK=; }
mkdir -p "$WORK"
# a --work directory is kept (the root tree, the partitions) for a look inside
cleanup() {
	[ -z "$OUT" ] || rm -f "$OUT.tmp"
	[ -z "$ROOT_ONLY" ] || rm -rf "$ROOT_ONLY.tmp"
	[ -n "$KEEP_WORK" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ROOT=$WORK/root
ESP_STAGE=$WORK/esp

# What a cell needs: the kernel for EC2 and QEMU (ENA, NVMe, virtio), systemd with networkd
# and resolved (DHCP, DNS), crun, CA certificates, and the shared libraries cell-agent links
# (checked against the binary after the install). dbus carries networkd's DNS servers to
# resolved; timesyncd keeps the clock kiyot's certificates are checked against.
# systemd-boot-efi is taken out again once its EFI binary is copied.
PKGS="systemd systemd-sysv udev dbus systemd-resolved systemd-timesyncd linux-image-cloud-$ARCH initramfs-tools
crun ca-certificates libgrpc29 libprotobuf-c1 libcurl4 libjansson4 libssl3 libarchive13
systemd-boot-efi"
PKGS=$(printf '%s' "$PKGS" | tr -s ' \n' ',,')

rm -rf "$ROOT" "$ESP_STAGE"
if [ -n "$FROM_ROOT" ]; then
	echo "build.sh: the root tree of $FROM_ROOT"
	if ! { cp -a "$FROM_ROOT/root" "$ROOT" && cp -a "$FROM_ROOT/esp" "$ESP_STAGE"; }; then
		die "copying the root tree of $FROM_ROOT failed (above)"
	fi
else
	SECURITY_SOURCE=
	[ "$SECURITY" = none ] || SECURITY_SOURCE="deb $SECURITY bookworm-security main"
	echo "build.sh: installing Debian bookworm ($ARCH) from $MIRROR into $ROOT"
	mkdir -p "$ESP_STAGE"
	export CELL_IMAGE_KIT="$KIT" CELL_IMAGE_ESP="$ESP_STAGE" CELL_IMAGE_EFI_ARCH="$EFI_ARCH"
	# (the hook's $1 is mmdebstrap's: the new root)
	# shellcheck disable=SC2016
	mmdebstrap --mode=root --variant=minbase --arch="$ARCH" --include="$PKGS" \
		--aptopt='Apt::Install-Recommends "false"' \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		--customize-hook='"$CELL_IMAGE_KIT/customize.sh" "$1"' \
		bookworm "$ROOT" "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
		${SECURITY_SOURCE:+"$SECURITY_SOURCE"} ||
		die "mmdebstrap failed (above: a package or the mirror $MIRROR); check that apt reaches it, or pass --mirror"
	# no package cache or lists in the image (a cell installs nothing)
	rm -rf "$ROOT/var/cache/apt/archives/"*.deb "$ROOT/var/cache/apt/archives/partial" \
		"$ROOT/var/lib/apt/lists/"*
fi

# --root-only: the tree and the loader's EFI binary, in place at once
if [ -n "$ROOT_ONLY" ]; then
	rm -rf "$ROOT_ONLY.tmp"
	if ! { mkdir "$ROOT_ONLY.tmp" && mv "$ROOT" "$ROOT_ONLY.tmp/root" &&
		mv "$ESP_STAGE" "$ROOT_ONLY.tmp/esp" && rm -rf "$ROOT_ONLY" &&
		mv "$ROOT_ONLY.tmp" "$ROOT_ONLY"; }; then
		die "moving the root tree to $ROOT_ONLY failed (above)"
	fi
	echo "build.sh: root tree $ROOT_ONLY built in $(($(date +%s) - START)) s"
	exit 0
fi

# the agent and its shim, side by side (the agent runs the shim from its own directory)
install -m 0755 -o 0 -g 0 "$AGENT" "$ROOT/usr/local/bin/cell-agent"
install -m 0755 -o 0 -g 0 "$SHIM" "$ROOT/usr/local/bin/cell-shim"

# every library cell-agent and cell-shim need is in the image
for bin in "$AGENT" "$SHIM"; do
	for lib in $(objdump -p "$bin" | awk '/NEEDED/ {print $2}'); do
		found=$(find "$ROOT/usr/lib" -name "$lib" -print -quit 2>/dev/null)
		[ -n "$found" ] || die "$(basename "$bin") needs $lib, which no package of the image holds: add its Debian package to PKGS in $0"
	done
done

# the kernel and initrd go to the EFI system partition
KVER=$(find "$ROOT/usr/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n 1)
if [ ! -f "$ROOT/boot/vmlinuz-$KVER" ] || [ ! -f "$ROOT/boot/initrd.img-$KVER" ]; then
	die "no kernel or initrd for '$KVER' in $ROOT/boot: the kernel package's install failed (above)"
fi
cp "$ROOT/boot/vmlinuz-$KVER" "$ESP_STAGE/vmlinuz"
cp "$ROOT/boot/initrd.img-$KVER" "$ESP_STAGE/initrd.img"
# the loader reads them from the ESP alone
rm -f "$ROOT/boot/vmlinuz-"* "$ROOT/boot/initrd.img-"* "$ROOT/vmlinuz"* "$ROOT/initrd.img"*

# the root file system: what was installed, plus room until it grows to the volume
ROOT_UUID=$(cat /proc/sys/kernel/random/uuid)
ROOT_PARTUUID=$(cat /proc/sys/kernel/random/uuid)
ESP_PARTUUID=$(cat /proc/sys/kernel/random/uuid)
DISK_UUID=$(cat /proc/sys/kernel/random/uuid)
echo "PARTUUID=$ROOT_PARTUUID / ext4 rw,noatime,x-systemd.growfs 0 0" >"$ROOT/etc/fstab"
USED_MB=$(du -sm "$ROOT" | cut -f1)
ROOT_MB=$(((USED_MB * 12 / 10 + FREE_MB + 63) / 64 * 64))
echo "build.sh: root file system of $ROOT_MB MiB ($USED_MB MiB used)"
rm -f "$WORK/root.img"
mkfs.ext4 -q -F -L cellroot -U "$ROOT_UUID" -d "$ROOT" -E root_owner=0:0 "$WORK/root.img" "${ROOT_MB}M" ||
	die "mkfs.ext4 -d failed (above)"

cat >"$ESP_STAGE/loader.conf" <<EOF
default cell.conf
timeout 0
editor no
EOF
cat >"$ESP_STAGE/cell.conf" <<EOF
title Kiyot cell ($KVER)
linux /vmlinuz
initrd /initrd.img
options root=PARTUUID=$ROOT_PARTUUID rw console=tty0 console=ttyS0,115200 nvme_core.io_timeout=4294967295 systemd.show_status=1
EOF
# the EFI system partition: systemd-boot as the fallback loader, the kernel, the initrd and
# one entry booting the root partition by its PARTUUID
rm -f "$WORK/esp.img"
mkfs.vfat -F 32 -n ESP -C "$WORK/esp.img" $((ESP_MB * 1024)) >/dev/null || die "mkfs.vfat failed (above)"
export MTOOLS_SKIP_CHECK=1
mmd -i "$WORK/esp.img" ::/EFI ::/EFI/BOOT ::/loader ::/loader/entries
mcopy -i "$WORK/esp.img" "$ESP_STAGE/systemd-boot$EFI_ARCH.efi" "::/EFI/BOOT/$EFI_BOOT"
mcopy -i "$WORK/esp.img" "$ESP_STAGE/vmlinuz" "$ESP_STAGE/initrd.img" ::/
mcopy -i "$WORK/esp.img" "$ESP_STAGE/loader.conf" ::/loader/loader.conf
mcopy -i "$WORK/esp.img" "$ESP_STAGE/cell.conf" ::/loader/entries/cell.conf

# the disk: GPT, the ESP at 1 MiB, the root after it, 1 MiB for the backup GPT at the end
DISK_MB=$((1 + ESP_MB + ROOT_MB + 1))
TMP_OUT=$OUT.tmp
rm -f "$TMP_OUT"
truncate -s "${DISK_MB}M" "$TMP_OUT"
sfdisk -q --no-reread --no-tell-kernel "$TMP_OUT" <<EOF || die "sfdisk failed (above)"
label: gpt
label-id: $DISK_UUID
start=1MiB, size=${ESP_MB}MiB, type=$ESP_TYPE, uuid=$ESP_PARTUUID, name="esp"
start=$((1 + ESP_MB))MiB, size=${ROOT_MB}MiB, type=$ROOT_TYPE, uuid=$ROOT_PARTUUID, name="root"
EOF
dd if="$WORK/esp.img" of="$TMP_OUT" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="$WORK/root.img" of="$TMP_OUT" bs=1M seek=$((1 + ESP_MB)) conv=notrunc,sparse status=none
mv "$TMP_OUT" "$OUT"

END=$(date +%s)
echo "build.sh: $OUT: $DISK_MB MiB, $ARCH, kernel $KVER, root PARTUUID $ROOT_PARTUUID"
echo "build.sh: image built in $((END - START)) s"
