#!/bin/sh
# postrm.sh owns what removing the package undoes: on purge, the fleet
# directory (it holds every user's records) and the group; on remove,
# nothing beyond the package's own files.
set -e
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
