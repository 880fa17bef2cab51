#!/usr/bin/env bash
# Debian packages the tests need from the system, installed only when missing:
#   scripts/apt_ensure.sh PROBE=PACKAGE ...
# PROBE is a command looked up on PATH, or an absolute path that must exist. Every PACKAGE whose
# probe fails is installed in one apt-get call (apt-get update first only if the install fails);
# not as root, one line names them and the script exits 0 (the test that needs them then fails,
# saying what is missing).
set -euo pipefail
missing=()
for pair in "$@"; do
  probe=${pair%%=*}
  package=${pair#*=}
  if [[ $probe == /* ]]; then
    [[ -e $probe ]] && continue
  else
    command -v "$probe" >/dev/null && continue
  fi
  missing+=("$package")
done
(( ${#missing[@]} == 0 )) && exit 0
if [[ $(id -u) != 0 ]]; then
  echo "missing: ${missing[*]} (as root: apt-get install ${missing[*]})"
  exit 0
fi
echo "== installing ${missing[*]} (apt-get)"
export DEBIAN_FRONTEND=noninteractive
install=(apt-get install -y -q --no-install-recommends "${missing[@]}")
"${install[@]}" >/dev/null || { apt-get update -q >/dev/null && "${install[@]}" >/dev/null; }
