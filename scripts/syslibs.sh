#!/bin/sh
# Debian installs some Erlang libraries under directory names that differ from
# their application names (p1_tls-1.1.16 holds the application fast_tls).
# relx finds applications by directory name, so link each one under
# _build/syslibs/APP-VSN.
set -eu
out=_build/syslibs
mkdir -p "$out"
for d in /usr/lib/erlang/lib/p1_*; do
    [ -d "$d/ebin" ] || continue
    for app in "$d"/ebin/*.app; do
        name=$(basename "$app" .app)
        vsn=${d##*-}
        ln -sfn "$d" "$out/$name-$vsn"
    done
done
