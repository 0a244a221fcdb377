#!/bin/sh
# customize.sh ROOT: the cell image's own part, run by build.sh through mmdebstrap's
# --customize-hook once the packages are installed (ROOT is the new root; the environment
# names the kit and where the EFI binary goes). The agent and its shim are not in it yet:
# build.sh puts them in afterwards, so the tree can be made before them. Not run by hand.
set -eu
R=$1
: "${CELL_IMAGE_KIT:?} ${CELL_IMAGE_ESP:?} ${CELL_IMAGE_EFI_ARCH:?}"

# configuration: the agent's unit, DHCP on every Ethernet link, DNS, journal, root growth
cp -R "$CELL_IMAGE_KIT/rootfs/." "$R/"
chown -R 0:0 "$R/etc/systemd" "$R/etc/repart.d"
chmod 0644 "$R/etc/systemd/system/cell-agent.service" "$R/etc/systemd/network/80-cell.network"

mkdir -p "$R/usr/local/bin"

# systemd-boot's EFI binary goes to the ESP; the package leaves the image
cp "$R/usr/lib/systemd/boot/efi/systemd-boot$CELL_IMAGE_EFI_ARCH.efi" "$CELL_IMAGE_ESP/"
chroot "$R" dpkg --purge systemd-boot-efi >/dev/null

# services: networkd (and its wait-online, for network-online.target), resolved, timesyncd,
# the agent;
# no periodic jobs a short-lived cell has no use for, and no getty but the serial console's
# (generated from console=ttyS0)
chroot "$R" systemctl enable systemd-networkd.service systemd-resolved.service \
	systemd-timesyncd.service cell-agent.service
for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service \
	fstrim.timer getty@.service; do
	chroot "$R" systemctl mask "$unit" >/dev/null 2>&1
done
ln -sf ../run/systemd/resolve/stub-resolv.conf "$R/etc/resolv.conf"

# root is locked: no password login anywhere (and there is no SSH server)
sed -i 's/^root:[^:]*:/root:*:/' "$R/etc/shadow"

# the instance gets its own machine id and host name at first boot
: >"$R/etc/machine-id"
rm -f "$R/var/lib/dbus/machine-id"
echo cell >"$R/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tcell\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$R/etc/hosts"

# what the build left behind
rm -rf "$R/var/log/"* "$R/var/cache/apt/"*.bin "$R/var/cache/debconf/"*-old "$R/tmp/"*
