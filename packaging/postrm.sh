#!/bin/sh
# postrm.sh owns what removing the package undoes: on purge, the fleet
# directory (it holds every user's records) and the group; on remove and
# purge, the eBPF spares the removed build pinned (kernel memory only this
# build could use; running holds keep the copies they took).
set -e
rm -rf /sys/fs/bpf/gpu-hold-spare
if [ "$1" = purge ]; then
	rm -rf /var/lib/gpu-hold
	if getent group gpu-hold >/dev/null 2>&1 && command -v groupdel >/dev/null 2>&1; then
		groupdel gpu-hold || true
	fi
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
