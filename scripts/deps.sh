#!/bin/sh
# Installs, with apt, the Debian packages Throng needs to build, run and test,
# skipping the ones already installed. Every Erlang dependency is a Debian
# erlang-* package: hex.pm is not used. gcc, make and libssl-dev build the
# TLS handshake NIF (apps/throng/c_src).
set -eu
PKGS="erlang-nox erlang-dev erlang-src rebar3 erlang-common-test erlang-dialyzer
erlang-eunit erlang-tools erlang-xmerl erlang-proper erlang-meck erlang-p1-xml
erlang-p1-yaml erlang-p1-tls erlang-p1-stringprep erlang-inets erlang-os-mon erlang-jiffy
erlang-p1-pgsql postgresql openssl curl python3-slixmpp gcc make libc6-dev libssl-dev"
if [ "${1:-}" = "--test" ]; then
    PKGS="$PKGS chromium"
fi
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "deps: installing$missing"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
