# Sourced by the bench scripts: fresh_release ROOT REL_DIR refuses to bench
# the default release when a module's source is newer than the module in it
# (a run would measure the last build, not the code). THRONG_REL set: a
# release chosen on purpose (an older commit, bench/pair.sh), not checked.
fresh_release() {
    [ -n "${THRONG_REL:-}" ] && return 0
    local root=$1 rel=$2 src app beam stale=""
    for src in "$root"/apps/*/src/*.erl "$root"/apps/*/src/*/*.erl; do
        [ -f "$src" ] || continue
        app=${src#"$root"/apps/}; app=${app%%/*}
        # Apps the release does not hold (the load generator) are not its.
        ls -d "$rel"/lib/"$app"-* > /dev/null 2>&1 || continue
        beam=$(ls "$rel"/lib/"$app"-*/ebin/"$(basename "$src" .erl)".beam 2>/dev/null | head -1)
        if [ -z "$beam" ] || [ "$src" -nt "$beam" ]; then stale="$stale $(basename "$src")"; fi
    done
    if [ -n "$stale" ]; then
        echo "the release at $rel is older than the source of:$stale;" \
             "run make release first (or set THRONG_REL to bench another release)" >&2
        return 1
    fi
}
