#!/bin/sh
# Server CPU and round trips per login over TLS, by the way a client logs
# in: STARTTLS or direct TLS (XEP-0368), a full TLS 1.3 handshake or one
# resumed with a session ticket, SASL PLAIN (first login: PBKDF2 on the
# server; again: its PLAIN cache) or SCRAM-SHA-256 (also -PLUS). Clients:
# OTP ssl in their own BEAM on this machine (bench/tls/tls_logins.erl).
#
#   bench/tls/logins.sh [N] [C]       (default 500 logins per variant, 10 at a time)
#   ITERATIONS=4096                   PBKDF2 count of the test accounts
#   TLS_VARIANTS=1,2,10,11            only these rows of the table (1-based)
#   CERTFILE=path.pem                 the server's certificate (chain and key);
#                                     default: the self-signed one it generates
#   TLS_LOGINS_AROUND=CMD             "CMD start" / "CMD stop" around each
#                                     variant's measured logins (a profiler)
#
# Resumed variants: each user first logs in once with a full handshake
# (not measured) and keeps the ticket it gets; the measured logins resume
# with it, C at a time. The last variant's first login also enables stream
# management and its connection is then cut; the measured login resumes
# that session inline in its SASL2 <authenticate/> (XEP-0198).
#
# Starts its own node from the release (make release): ports 25222
# (plain TCP and STARTTLS) and 25223 (direct TLS), a fresh data directory.
# The plain-TCP variants are the baseline: what a login costs without TLS.
set -eu
N=${1:-500}; C=${2:-10}
root=$(cd "$(dirname "$0")/../.." && pwd)
rel="${THRONG_REL:-$root/_build/default/rel/throng}"
[ -x "$rel/bin/throng" ] || { echo "build the release first: make release" >&2; exit 1; }
work=$(mktemp -d /tmp/throng-tls-logins.XXXXXX)
export THRONG_NODE=thronglogins@127.0.0.1 THRONG_RUN_DIR="$work" THRONG_CONFIG="$work/throng.yml"
cat > "$THRONG_CONFIG" <<YML
hosts: [localhost]
data_dir: "$work/data"
loglevel: warning
listen:
  - port: 25222
    starttls: optional
  - port: 25223
    direct_tls: true
stats:
  port: 0
YML
[ -z "${CERTFILE:-}" ] || echo "certfile: \"$CERTFILE\"" >> "$THRONG_CONFIG"
cleanup() { "$rel/bin/throng" stop >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM
"$rel/bin/throng" start
"$rel/bin/throng" bulk-register localhost "$((3 * N))" password user 0 "${ITERATIONS:-4096}"
pid=$(cat "$work/throng.pid")
beam=$(pgrep -P "$pid" beam.smp || echo "$pid")
erlc -o "$work" "$root/bench/tls/tls_logins.erl"
echo "$N logins per variant, $C at a time; accounts with ${ITERATIONS:-4096} PBKDF2 iterations"
lib=$(ls -d "$root"/_build/default/lib/throng_lib/ebin "$rel"/lib/throng_lib-*/ebin 2>/dev/null | head -n 1)
erl -noshell -pa "$work" -pa "$lib" -run tls_logins main "$beam" 25222 25223 "$N" "$C"
