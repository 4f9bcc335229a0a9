#!/bin/sh
# Three TLS stacks side by side on this machine: memory per idle
# server-side TLS connection (server RSS growth / N, after garbage
# collection and returning free C heap pages) and server CPU per handshake
# (RSA-2048 certificate, TLS 1.3 negotiated, OTP ssl clients in another
# BEAM). The decision in docs/tls.md rests on this.
#
#   bench/tls/stacks.sh [N]        (default 5000 connections per stack)
#   STACKS="fast_tls otp_ssl throng"
#
# Needs the build (rebar3 compile: throng's ebin and its NIF) and Debian's
# erlang-p1-tls for fast_tls.
set -eu
N=${1:-5000}
root=$(cd "$(dirname "$0")/../.." && pwd)
ebin="$root/_build/default/lib/throng/ebin"
lib="$root/_build/default/lib/throng_lib/ebin"
[ -f "$ebin/throng_tls_nif.beam" ] || { echo "$0: build first (rebar3 compile)" >&2; exit 2; }
work=$(mktemp -d /tmp/throng-tls-stacks.XXXXXX)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT INT TERM
erlc -o "$work" "$root/bench/tls/tls_stacks.erl"
openssl req -x509 -nodes -days 2 -subj /CN=localhost -newkey rsa:2048 \
    -keyout "$work/key.pem" -out "$work/crt.pem" 2>/dev/null
cat "$work/crt.pem" "$work/key.pem" > "$work/server.pem"
port=25443
for stack in ${STACKS:-fast_tls otp_ssl throng}; do
    erl -noshell -name tlsstacks@127.0.0.1 -setcookie tlsstacks +P 200000 \
        -pa "$work" -pa "$ebin" -run tls_stacks server "$stack" "$port" "$work/server.pem" &
    server=$!
    erl -noshell -name tlsclient@127.0.0.1 -setcookie tlsstacks -pa "$work" -pa "$lib" \
        -run tls_stacks main tlsstacks@127.0.0.1 "$server" "$port" "$N" "$stack" | grep RESULT
    kill "$server"; wait "$server" 2>/dev/null || true
    server=""
    sleep 1
done
