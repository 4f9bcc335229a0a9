#!/bin/sh
# What OpenSSL keeps per idle server-side TLS connection (fast_tls's way of
# using it: an SSL object and two memory BIOs per connection), by
# allocation site: the measurement behind docs/tls.md's "where the bytes
# of a TLS session were". Needs gcc and libssl-dev (scripts/deps.sh).
#
#   bench/tls/openssl_mem.sh [N]      (default 1000 connections)
set -eu
N=${1:-1000}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/throng-openssl-mem.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
cc -O2 -o "$work/openssl_mem" "$here/openssl_mem.c" -lssl -lcrypto
openssl req -x509 -nodes -days 2 -subj /CN=localhost -newkey rsa:2048 \
    -keyout "$work/rsa.key" -out "$work/rsa.crt" 2>/dev/null
openssl req -x509 -nodes -days 2 -subj /CN=localhost -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
    -keyout "$work/ec.key" -out "$work/ec.crt" 2>/dev/null
cat "$work/rsa.crt" "$work/rsa.key" > "$work/rsa.pem"
cat "$work/ec.crt" "$work/ec.key" > "$work/ec.pem"
echo "OpenSSL $(openssl version | cut -d' ' -f2), $N connections each"
for key in rsa ec; do
    for v in 1 0; do
        "$work/openssl_mem" "$N" "$work/$key.pem" "$v" | sed "s|$work/||"
    done
done
echo
echo "by allocation site (rsa.pem, TLS 1.3; bytes and allocations per connection, >= 50 B):"
"$work/openssl_mem" "$N" "$work/rsa.pem" 1 sites |
    awk -v n="$N" '/^SITE/ { b[$2] += $3; c[$2]++ }
                   END { for (k in b) if (b[k] >= 50 * n) printf "%8d B  %5.1f  %s\n", b[k] / n, c[k] / n, k }' |
    sort -rn
