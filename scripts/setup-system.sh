#!/usr/bin/env bash
# Installs the Debian packages that the build and the tests need, when they are missing.
# Safe to run repeatedly; does nothing when everything is present.
set -euo pipefail
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
# The web UI's browser tests drive Debian's Chromium (playwright-core with executablePath /usr/bin/chromium).
[ -x /usr/bin/chromium ] || need+=(chromium)
# ARM64: test/core-native/arm64.test.ts cross-builds the engine and runs its kernel self-test under qemu.
if [ "$(uname -m)" = x86_64 ]; then
  command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
  command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
fi
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "splash: please install: ${need[*]}" >&2; exit 1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
