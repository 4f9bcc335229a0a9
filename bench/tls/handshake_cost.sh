#!/bin/sh
# What a TLS 1.3 handshake costs the server, taken apart: OpenSSL 3.0's
# part inside Throng (the NIF built with TIMING=1, in a copy of the
# release), around real logins over direct TLS, full and resumed (the
# login rows 10 and 11 of bench/tls/logins.sh); then the same handshakes
# in memory, by one method, with three engines: OpenSSL 3.0 and GnuTLS 3.7
# (bench/tls/engines_handshake.c, needs libgnutls28-dev) and rustls (ring,
# when cargo is installed). All with the server's suite order, AES-128-GCM
# first, as Throng.
#
#   bench/tls/handshake_cost.sh [N] [C]     (default 1000 logins, 10 at a time)
#   CERTFILE=path.pem                        the server's certificate (default: the
#                                            self-signed ECDSA P-256 one Throng makes)
set -eu
N=${1:-1000}; C=${2:-10}
root=$(cd "$(dirname "$0")/../.." && pwd)
rel="${THRONG_REL:-$root/_build/default/rel/throng}"
[ -x "$rel/bin/throng" ] || { echo "build the release first: make release" >&2; exit 1; }
tmp=$(mktemp -d /tmp/throng-hs-cost.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
cp -a "$rel" "$tmp/rel"
priv=$(ls -d "$tmp"/rel/lib/throng-*/priv)
make -s -B -C "$root/apps/throng/c_src" TIMING=1 OUT="$priv/throng_tls_nif.so" >/dev/null
# Around each measured variant: reset the NIF's sums, then print them.
cat > "$tmp/around.sh" <<'SH'
#!/bin/sh
erl -noshell -name "hscost$$@127.0.0.1" -setcookie "$(cat "$THRONG_RUN_DIR/cookie")" -eval "
  N = list_to_atom(os:getenv(\"THRONG_NODE\")),
  T = rpc:call(N, throng_tls_nif, timing, []),
  case {\"$1\", T} of
      {\"stop\", #{handshakes := H} = M} when H > 0 ->
          {ok, F} = file:open(\"$HS_TIMING_OUT\", [append]),
          io:format(F, \"  OpenSSL in the NIF, ~b handshakes, CPU per handshake: answering the ClientHello ~.1f us, later steps ~.1f us, keys and bindings ~.1f us, freeing ~.1f us; total ~.1f us~n\",
                    [H | [maps:get(K, M) / H || K <- [answer_us, later_steps_us, info_us, free_us]]]
                    ++ [lists:sum([maps:get(K, M) || K <- [answer_us, later_steps_us, info_us, free_us]]) / H]);
      {\"stop\", Other} -> file:write_file(\"$HS_TIMING_OUT\", io_lib:format(\"  timing: ~p~n\", [Other]), [append]);
      _ -> ok
  end,
  halt()."
SH
chmod +x "$tmp/around.sh"
echo "== Throng (OpenSSL $(openssl version | cut -d' ' -f2)), logins over direct TLS"
HS_TIMING_OUT="$tmp/timing.txt" THRONG_REL="$tmp/rel" TLS_VARIANTS=10,11 \
    TLS_LOGINS_AROUND="$tmp/around.sh" "$root/bench/tls/logins.sh" "$N" "$C" 2>&1 \
    | grep -v "^throng:\|^Registered"
echo "OpenSSL's part of those logins (the full handshakes, then the resumed ones):"
cat "$tmp/timing.txt" 2>/dev/null || echo "  (no timing: the NIF's TIMING build did not load)"
pem=${CERTFILE:-}
if [ -z "$pem" ]; then
    pem="$tmp/ec.pem"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=localhost -keyout "$tmp/ec.key" -out "$tmp/ec.crt" 2>/dev/null
    cat "$tmp/ec.crt" "$tmp/ec.key" > "$pem"
fi
echo "== OpenSSL and GnuTLS (Debian's), the same handshakes in memory (bench/tls/engines_handshake.c)"
if cc -O2 -o "$tmp/engines_handshake" "$root/bench/tls/engines_handshake.c" -lssl -lcrypto -lgnutls; then
    for engine in openssl gnutls; do
        for kind in full resumed; do
            AES128=1 "$tmp/engines_handshake" "$pem" "$N" "$kind" "$engine"
        done
    done
else
    echo "(no build of engines_handshake.c: apt-get install libgnutls28-dev libssl-dev)"
fi
if command -v cargo >/dev/null 2>&1; then
    echo "== rustls (ring), the same handshakes in memory"
    (cd "$root/bench/tls/rustls_handshake" && cargo build --release -q)
    for kind in full resumed; do
        "$root/bench/tls/rustls_handshake/target/release/rustls_handshake" "$pem" "$N" "$kind"
    done
else
    echo "(cargo not installed: no rustls comparison)"
fi
