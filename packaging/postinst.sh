#!/bin/sh
# postinst.sh owns what the package does once installed: the gpu-hold group
# (sysusers.d) and the fleet directory (tmpfiles.d), made with systemd's
# tools where they run, else by hand with the same owner and mode.
set -e
if command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers /usr/lib/sysusers.d/gpu-hold.conf || true
fi
getent group gpu-hold >/dev/null 2>&1 || groupadd --system gpu-hold
if command -v systemd-tmpfiles >/dev/null 2>&1; then
	systemd-tmpfiles --create /usr/lib/tmpfiles.d/gpu-hold.conf || true
fi
for d in /var/lib/gpu-hold /var/lib/gpu-hold/gpu /var/lib/gpu-hold/gpu/records; do
	[ -d "$d" ] || install -d -m 3775 -o root -g gpu-hold "$d"
done
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
