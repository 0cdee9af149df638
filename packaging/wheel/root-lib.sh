# Shared by packaging/wheel/make-root.sh and check-in-root.sh (sourced, not run): how programs of
# a Debian root made by make-root.sh are run from this machine, natively or, for a foreign
# architecture (arm64 on an x86_64 host), under qemu-user-static.
#
# arm64 programs. qemu-user runs one arm64 program; when that program execs another (a shell
# running a command, dpkg running a maintainer script, ddprun starting its workers), the host
# kernel runs the new file, and an arm64 ELF then fails with "Exec format error" unless binfmt_misc
# has a handler for it. So binfmt_misc is the working way, and root_binfmt sets it up:
#   1. /proc/sys/fs/binfmt_misc is mounted when it is not (in this container it was an empty
#      directory: the binfmt_misc file system is in /proc/filesystems, nothing had mounted it, and
#      `mount -t binfmt_misc` as root works);
#   2. the qemu-aarch64 handler is registered when it is not, with the line qemu-user-static ships
#      (/usr/lib/binfmt.d/qemu-aarch64.conf, flags OPF: F opens the interpreter at registration,
#      so it works inside a chroot without the root holding a copy). This is what systemd-binfmt
#      does at boot on a machine with systemd; the handler stays registered afterwards (the
#      kernel's state, for every process of the machine, as an `apt install qemu-user-static`
#      on such a machine leaves it).
# Where neither can be done (no privilege, a kernel without binfmt_misc), programs are run
# explicitly, `chroot ROOT /usr/bin/qemu-aarch64-static PROGRAM ...` (make-root.sh copies the
# static qemu into the root's /usr/bin). That runs single programs (`ddprun --version`, Python)
# but nothing that execs another arm64 program. Measured here before the handler was registered
# (DDPRUN_QEMU_MODE=explicit): `chroot ROOT qemu-aarch64-static /bin/sh -c 'echo $((6*7)); ls'`
# prints 42, then "ls: Exec format error"; debootstrap's second stage fails at its first exec
# ("grep: Exec format error"), so an arm64 root cannot even be made that way.
# DDPRUN_QEMU_MODE=explicit forces that mode (to see those failures), =binfmt requires binfmt.

ROOT_QEMU_AARCH64=/usr/bin/qemu-aarch64-static
ROOT_BINFMT_DIR=/proc/sys/fs/binfmt_misc

# root_host_arch: Debian's name of this machine's architecture (amd64, arm64).
root_host_arch() { dpkg --print-architecture; }

# root_binfmt ROOT: makes arm64 ELF files run under qemu (see above); returns 1 where it cannot.
root_binfmt() {
  local root="$1" entry="$ROOT_BINFMT_DIR/qemu-aarch64" conf=/usr/lib/binfmt.d/qemu-aarch64.conf
  local line interpreter
  [ "${DDPRUN_QEMU_MODE:-auto}" != explicit ] || return 1
  if [ ! -e "$ROOT_BINFMT_DIR/register" ]; then
    mount -t binfmt_misc binfmt_misc "$ROOT_BINFMT_DIR" 2>/dev/null || return 1
  fi
  if [ ! -e "$entry" ]; then
    if [ -r "$conf" ]; then
      line="$(grep -v '^#' "$conf" | head -n 1)"
    else
      local magic='\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
      local mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
      line=":qemu-aarch64:M::$magic:$mask:$ROOT_QEMU_AARCH64:OF"
    fi
    printf '%s' "$line" > "$ROOT_BINFMT_DIR/register" 2>/dev/null || return 1
    interpreter="$(sed -n 's/^interpreter //p' "$entry")"
    echo "root: registered the qemu-aarch64 binfmt_misc handler ($interpreter)" >&2
  fi
  grep -qx enabled "$entry" && grep -qx enabled "$ROOT_BINFMT_DIR/status" || return 1
  # Without the F flag the kernel opens the interpreter inside the chroot: give the root a copy.
  if ! grep -q '^flags:.*F' "$entry"; then
    interpreter="$(sed -n 's/^interpreter //p' "$entry")"
    mkdir -p "$root$(dirname "$interpreter")"
    cp -L "$ROOT_QEMU_AARCH64" "$root$interpreter"
  fi
  return 0
}

# root_runner ROOT ARCH: sets the array ROOT_RUN to the command prefix that runs a program of the
# root, and ROOT_QEMU to how (native, binfmt or explicit).
root_runner() {
  local root="$1" arch="$2"
  ROOT_RUN=(chroot "$root")
  if [ "$arch" = "$(root_host_arch)" ]; then
    ROOT_QEMU=native
  elif [ "$arch" = arm64 ] && [ "$(root_host_arch)" = amd64 ]; then
    if root_binfmt "$root"; then
      ROOT_QEMU=binfmt
    elif [ "${DDPRUN_QEMU_MODE:-auto}" = binfmt ]; then
      echo "root: DDPRUN_QEMU_MODE=binfmt, and no qemu-aarch64 binfmt_misc handler" >&2
      return 1
    else
      ROOT_QEMU=explicit
      ROOT_RUN=(chroot "$root" "$ROOT_QEMU_AARCH64")
      echo "root: no binfmt_misc handler for arm64: programs run explicitly under qemu" \
        "(one that execs another fails)" >&2
    fi
  else
    echo "root: cannot run $arch programs on $(root_host_arch)" >&2
    return 1
  fi
}
