#!/usr/bin/env bash
# fake_dpkg.sh BIN DB - fake dpkg, dpkg-query, id, npm and apt-get in BIN for
# the scripts' tests (sourced): the package database is the file DB, one
# "NAME ARCH STATUS" line per installed instance; the host is amd64;
# `id -u` answers $FAKE_UID; apt-get appends its arguments to BIN/apt-get.log.
fake_dpkg() {
  local bin=$1 db=$2
  mkdir -p "$bin"
  cat >"$bin/dpkg-query" <<EOS
#!/usr/bin/env bash
# dpkg-query -W -f=FORMAT NAME...: every instance of each NAME in the
# database as "NAME ARCH STATUS" (the format of scripts/deps.sh); exit 1
# when a NAME has none, as dpkg-query does.
rc=0
for a in "\$@"; do
  case \$a in -W | -f=*) continue ;; esac
  awk -v n="\${a%%:*}" '\$1 == n { print; found = 1 } END { exit !found }' "$db" ||
    { echo "dpkg-query: no packages found matching \$a" >&2; rc=1; }
done
exit \$rc
EOS
  cat >"$bin/dpkg" <<'EOS'
#!/bin/sh
case "$1" in
--print-architecture) echo amd64 ;;
--print-foreign-architectures) echo arm64 ;;
*) exit 1 ;;
esac
EOS
  printf '#!/bin/sh\n[ "$1" = -u ] && echo "${FAKE_UID:-1000}"\n' >"$bin/id"
  printf '#!/bin/sh\nexit 0\n' >"$bin/npm"
  printf '#!/bin/sh\necho "$*" >>"%s/apt-get.log"\n' "$bin" >"$bin/apt-get"
  chmod +x "$bin"/*
}
