#!/usr/bin/env bash
# Build the tiny Linux guest used by the serial-console capture integration tests.
#
# Usage: tests/guest/build.sh [OUT_DIR]        (default OUT_DIR: /var/cache/longhaul-guest)
#
# Writes these files into OUT_DIR and prints their paths:
#   vmlinuz            Debian bookworm's stock amd64 kernel, from the package that the
#                      linux-image-amd64 metapackage depends on (downloaded, not installed).
#   vmlinux            the same kernel, uncompressed (65 MB). Boots in ~3-5 s under TCG
#                      instead of ~8-12 s, because vmlinuz spends ~5-7 s unpacking itself.
#   initramfs.cpio.gz  busybox-static plus the /init script below; about 1 MB.
#   cmdline            the kernel command line to boot with.
# Results are cached: a file that exists is not rebuilt (initramfs.cpio.gz and cmdline are
# rebuilt when this script is newer than them). Delete OUT_DIR to start from scratch; the
# kernel version is whatever the host's apt lists point at when it is first fetched.
# Needs: apt-get, dpkg-deb, xz, gzip and the busybox-static package (Debian 12 host).
#
# What the guest does: prints its boot log on ttyS0 (the first serial port), then
# "longhaul-guest: init up", then reads one command per line from ttyS1 (the second port):
#   panic      kernel panic via sysrq-c; with panic=0 it stays panicked until a power cycle
#   say TEXT   print TEXT on the console
#   flood N    print "longhaul-guest: flood 1" .. "flood N" quickly, then "longhaul-guest: flood done"
#   poweroff   power off at once (the kernel prints "reboot: Power down", QEMU exits with 0)
#   oops       not supported: the stock Debian kernel has no way to oops on demand (LKDTM
#              is not built and sysrq has no oops key); the guest just says so on the console.
# Unknown commands get "longhaul-guest: unknown command: ...". Send commands only after
# "init up" has appeared: input on ttyS1 before that may be lost.
#
# Booting it (checked with QEMU 7.2, TCG; KVM hangs in firmware on our CI machines):
#
#   qemu-system-x86_64 -accel tcg -m 256 -nodefaults -no-user-config -display none \
#     -kernel OUT_DIR/vmlinux -initrd OUT_DIR/initramfs.cpio.gz -append "$(cat OUT_DIR/cmdline)" \
#     -chardev socket,id=ttyS0,host=127.0.0.1,port=PORT,server=on,wait=off,logfile=LOG \
#     -chardev socket,id=ttyS1,path=CMD_SOCKET,server=on,wait=off \
#     -serial chardev:ttyS0 -serial chardev:ttyS1
#
# (-kernel OUT_DIR/vmlinuz works too, only slower.) ttyS0, the console, is a TCP server
# that one client at a time may connect to, disconnect from and reconnect to; ttyS1 is a
# unix socket the test writes commands to, one connection per command is fine.
# Early lines: with wait=off, console output written while no client is connected is
# dropped, so a client that connects late misses the boot log, unless logfile= is given:
# QEMU then also copies every byte to LOG, client or not (logfile= is optional).
# With wait=on instead, QEMU prints "QEMU waiting for connection on: ..." and does not start
# the guest (nor create CMD_SOCKET, which comes later on the command line) until a client
# connects to PORT; that client then sees everything from "Linux version" on.
# Power cycling: the QMP command system_reset reboots a panicked guest. Don't add
# -no-reboot: with it, system_reset makes QEMU exit instead. A panicked guest spins one
# host core at 100% until it is reset or QEMU is stopped.
set -euo pipefail

out=${1:-/var/cache/longhaul-guest}
# No "quiet": the tests want the whole boot log, "Linux version ..." first. panic=0: after a
# panic, wait forever instead of rebooting, so only a power cycle brings the guest back.
# No oops=panic: the guest can't oops on demand anyway (see "oops" above).
cmdline='console=ttyS0,115200 panic=0'
busybox=/bin/busybox
self=${BASH_SOURCE[0]}

mkdir -p "$out"
# Scratch space, made on first use inside $out so finished files can be renamed into place.
tmp=
trap '[[ -z $tmp ]] || rm -rf "$tmp"' EXIT
scratch() { [[ -n $tmp ]] || tmp=$(mktemp -d "$out/.build.XXXXXX"); }

# Whether $1 must be (re)built: it is missing, or (with a second argument) older than this script.
stale() { [[ ! -s $1 ]] || { [[ $# -gt 1 ]] && [[ $self -nt $1 ]]; }; }

# Download the kernel package the metapackage currently points at (e.g. linux-image-6.1.0-56-amd64).
fetch_kernel() {
  local pkg
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
        awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
  [[ -n $pkg ]] || return 1
  echo "downloading $pkg" >&2
  # The sandbox option only silences apt's warning that user _apt can't write to $tmp.
  (cd "$tmp" && apt-get -q -o APT::Sandbox::User=root download "$pkg")
}

if stale "$out/vmlinuz"; then
  scratch
  fetch_kernel || { apt-get update -q && fetch_kernel; }
  dpkg-deb -x "$tmp"/linux-image-*.deb "$tmp/kernel"
  mv "$tmp"/kernel/boot/vmlinuz-* "$out/vmlinuz"
fi

# vmlinuz decompresses itself with xz, which takes ~5-7 s under TCG. QEMU can boot the
# uncompressed ELF inside it directly (PVH entry point), so cut that out once here.
if stale "$out/vmlinux"; then
  scratch
  off=$(LC_ALL=C grep -m1 -aboP '\xfd7zXZ(?=\x00)' "$out/vmlinuz")  # xz magic bytes
  # (xz stops at the end of the stream; a plain pipe would then fail on tail's SIGPIPE.)
  xz -dc --single-stream < <(tail -c +$(( ${off%%:*} + 1 )) "$out/vmlinuz") > "$tmp/vmlinux"
  mv "$tmp/vmlinux" "$out/vmlinux"
fi

if stale "$out/initramfs.cpio.gz" newer; then
  # A dynamically linked busybox (package "busybox") would not run in the guest.
  if ldd "$busybox" >/dev/null 2>&1; then
    echo "$busybox is not static: install busybox-static" >&2
    exit 1
  fi
  scratch
  root=$tmp/root
  mkdir -p "$root"/{bin,dev,proc,sys}
  cp "$busybox" "$root/bin/busybox"
  cat > "$root/init" <<'EOF'
#!/bin/busybox sh
# PID 1 of the longhaul test guest (generated by tests/guest/build.sh).
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
echo 1 > /proc/sys/kernel/sysrq
# Keep ttyS1 open from here on: each last close of a serial port, and the open after it,
# throws away input that is waiting. And don't echo commands back to the sender.
exec 3</dev/ttyS1
stty -echo <&3
echo "longhaul-guest: init up"
while :; do
  # read fails if ttyS1 hangs up; wait and retry rather than exit (PID 1 exiting panics).
  read -r cmd arg <&3 || { sleep 1; continue; }
  case $cmd in
    panic) echo c > /proc/sysrq-trigger ;;
    oops) echo "longhaul-guest: oops is not supported by this kernel" ;;
    say) echo "$arg" ;;
    flood) seq 1 "$arg" | sed 's/^/longhaul-guest: flood /'; echo "longhaul-guest: flood done" ;;
    poweroff) poweroff -f ;;
    "") ;;
    *) echo "longhaul-guest: unknown command: $cmd" ;;
  esac
done
EOF
  chmod 755 "$root/init"
  (cd "$root" && find . | sort | "$busybox" cpio -o -H newc -R 0:0 2>/dev/null) |
    gzip -9 > "$tmp/initramfs.cpio.gz"
  mv "$tmp/initramfs.cpio.gz" "$out/initramfs.cpio.gz"
fi

if stale "$out/cmdline" newer; then
  echo "$cmdline" > "$out/cmdline"
fi

echo "$out/vmlinuz"
echo "$out/vmlinux"
echo "$out/initramfs.cpio.gz"
echo "$out/cmdline"
