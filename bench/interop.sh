#!/bin/bash
# Runs the XMPP Interop Testing suite (the Smack Integration Test Framework
# with the XMPP-Interop-Testing "smack-sint-server-extensions" tests) against
# Throng's release and, for comparison, Debian's Prosody and ejabberd, one
# after another, and writes a per-specification table of passed / failed /
# could-not-run tests (docs/interop.md).
#
#   bench/interop.sh [SERVER...]      SERVER: throng, prosody, ejabberd
#
# Default: throng, then each of prosody and ejabberd that is installed.
# Results: bench/results/interop/<date>/: summary.md, summary.json and, per
# server, the suite's results (results.jsonl.xz: one line per test; its
# JUnit XML and log; traces.tar.xz: each test's XMPP traffic); the table is
# printed at the end. docs/interop.md explains them.
#
# The suite is one self-contained jar,
# smack-sint-server-extensions-<version>-jar-with-dependencies.jar, looked
# for in this order:
#   1. SINT_JAR=/path/to/the.jar
#   2. _build/interop/smack-sint-server-extensions-$SINT_VERSION-jar-with-dependencies.jar
#   3. Maven: org.igniterealtime.smack:smack-sint-server-extensions:$SINT_VERSION:jar:jar-with-dependencies
#      (mvn dependency:copy; not for -SNAPSHOT versions. The project
#      publishes its jars as release files, not on Maven Central, so this
#      finds nothing unless a repository you use serves them)
#   4. built from source: SINT_SRC=a git clone of smack-sint-server-extensions;
#      SINT_REF (a tag or commit) is built with `mvn package'; its Smack
#      comes from Maven Central
# The jar is kept under _build/interop/, never committed.
#
# Settings (environment):
#   SINT_VERSION      the suite's version, as in the jar's name (default
#                     1.6.1-SNAPSHOT: commit 4f16877, v1.6.0 and ten fixes,
#                     the last before the suite moved to Smack 4.5.0-beta6,
#                     which Maven Central does not serve; docs/interop.md)
#   SINT_REF          what SINT_SRC builds (default: that commit for the
#                     default version, else tag v$SINT_VERSION)
#   SINT_TIMEOUT      the suite's reply timeout per XMPP action, ms (5000)
#   SINT_ENABLED_SPECS / SINT_DISABLED_SPECS   e.g. XEP-0045,XEP-0313
#   SINT_ENABLED_TESTS / SINT_DISABLED_TESTS   e.g. EntityCapsTest
#                     (SINT_DISABLED_TESTS adds to the three tests that are
#                     always disabled, see `aborting' below)
#   INTEROP_OUT       results directory (bench/results/interop/<date>)
#   INTEROP_NETNS     1 (default when root): each server and the suite run in
#                     a private network namespace, so the suite's fixed port
#                     5222 never meets another server on this machine; 0: on
#                     the host, where 127.0.0.1:5222 must be free
#   INTEROP_RUN_TIMEOUT  seconds one server's run may take at most (5400)
#
# Needs java (17), mvn (to fetch or build the jar), python3, openssl; Prosody
# and ejabberd from Debian (apt-get install prosody ejabberd, with a
# policy-rc.d that exits 101 so that apt starts nothing). Never used by CI.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd -P)
self="$root/bench/interop.sh"
SINT_VERSION=${SINT_VERSION:-1.6.1-SNAPSHOT}
if [ "$SINT_VERSION" = 1.6.1-SNAPSHOT ]; then
    SINT_REF=${SINT_REF:-4f1687768fcad98c8ff307cba1b3b9236053a2ee}
else
    SINT_REF=${SINT_REF:-v$SINT_VERSION}
fi
SINT_TIMEOUT=${SINT_TIMEOUT:-5000}
INTEROP_RUN_TIMEOUT=${INTEROP_RUN_TIMEOUT:-5400}
cache="$root/_build/interop"
admin_user=sintadmin
admin_pass=sint-Admin-pw-1
domain=localhost

# Tests disabled for every server: with Smack 4.5.0-beta5's framework, the
# IllegalArgumentException these throw on a server whose room configuration
# form has no muc#roomconfig_passwordprotectedroom field (Prosody 0.12)
# escapes the framework and aborts the whole run.
aborting=MultiUserChatOccupantIntegrationTest.mucJoinPasswordProtectedRoomCorrectPasswordTest,MultiUserChatOccupantIntegrationTest.mucJoinPasswordProtectedRoomWrongPasswordTest,MultiUserChatOccupantIntegrationTest.mucJoinPasswordProtectedWithoutPasswordRoomTest

die() { echo "interop.sh: $*" >&2; exit 2; }
log() { echo "interop.sh: $*" >&2; }

# ---------------------------------------------------------------- the jar --
find_jar() {
    local name="smack-sint-server-extensions-$SINT_VERSION-jar-with-dependencies.jar"
    if [ -n "${SINT_JAR:-}" ]; then
        [ -f "$SINT_JAR" ] || die "SINT_JAR=$SINT_JAR: no such file"
        jar="$SINT_JAR"; return 0
    fi
    jar="$cache/$name"
    [ -f "$jar" ] && return 0
    mkdir -p "$cache"
    command -v mvn >/dev/null || die "mvn is not installed (apt-get install maven); or give SINT_JAR=/path/to/$name"
    case "$SINT_VERSION" in
    *-SNAPSHOT) ;;
    *)
        log "fetching org.igniterealtime.smack:smack-sint-server-extensions:$SINT_VERSION:jar:jar-with-dependencies with Maven"
        if mvn -B -q dependency:copy \
               -Dartifact="org.igniterealtime.smack:smack-sint-server-extensions:$SINT_VERSION:jar:jar-with-dependencies" \
               -DoutputDirectory="$cache" >"$cache/mvn-copy.log" 2>&1 && [ -f "$jar" ]; then
            return 0
        fi
        log "not in the Maven repositories (see $cache/mvn-copy.log)" ;;
    esac
    if [ -n "${SINT_SRC:-}" ]; then
        local src="$cache/src-$SINT_VERSION"
        log "building $SINT_REF from $SINT_SRC (log: $cache/build-$SINT_VERSION.log)"
        rm -rf "$src"; mkdir -p "$src"
        if git -C "$SINT_SRC" rev-parse --git-dir >/dev/null 2>&1; then
            git -C "$SINT_SRC" archive "$SINT_REF" | tar -x -C "$src" \
                || die "$SINT_SRC has no $SINT_REF"
        else
            cp -R "$SINT_SRC/." "$src/"
        fi
        (cd "$src" && mvn -B -q -DskipTests package) >"$cache/build-$SINT_VERSION.log" 2>&1 \
            || die "building the suite failed: see $cache/build-$SINT_VERSION.log"
        cp "$src/target/$name" "$jar" || die "the build made no $name"
        return 0
    fi
    die "no $name: the XMPP-Interop-Testing project publishes its jars as release files, not on Maven Central.
  Put it at $jar, or give SINT_JAR=/path/to/it,
  or SINT_SRC=/path/to/a/clone/of/smack-sint-server-extensions to build $SINT_REF here."
}

compile_processor() {
    local out="$cache/classes-$SINT_VERSION"
    if [ ! -f "$out/throng/interop/InteropJsonResultProcessor.class" ] \
       || [ "$root/bench/interop/InteropJsonResultProcessor.java" -nt "$out/throng/interop/InteropJsonResultProcessor.class" ]; then
        command -v javac >/dev/null || die "javac is not installed (apt-get install openjdk-17-jdk-headless)"
        mkdir -p "$out"
        javac -nowarn -d "$out" -cp "$jar" "$root/bench/interop/InteropJsonResultProcessor.java" \
            || die "could not compile bench/interop/InteropJsonResultProcessor.java against $jar"
    fi
    classes="$out"
}

# ------------------------------------------------------- network namespace --
# Inside a fresh namespace only loopback exists; bring it up. Every process
# left in the namespace (epmd started by an Erlang node, ...) is ours: end
# them by pid when the run ends.
netns_up() { ip link set lo up; }
netns_pids() {  # the processes in our namespace but this script (and this subshell)
    local me ns pid
    me=$(readlink /proc/$$/ns/net)
    for pid in $(ls /proc | grep -E '^[0-9]+$'); do
        [ "$pid" = $$ ] || [ "$pid" = "$BASHPID" ] && continue
        ns=$(readlink "/proc/$pid/ns/net" 2>/dev/null) || continue
        if [ "$ns" = "$me" ]; then echo "$pid"; fi
    done
}
netns_kill_rest() {
    local pids i=0
    pids=$(netns_pids)
    [ -n "$pids" ] || return 0
    kill $pids 2>/dev/null || true
    while [ $i -lt 50 ] && [ -n "$(netns_pids)" ]; do sleep 0.2; i=$((i + 1)); done
    pids=$(netns_pids)
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
}

wait_port() {  # wait_port PID_OR_EMPTY NAME LOG
    local i=0
    while ! ss -ltn "sport = :5222" | grep -q LISTEN; do
        [ $i -ge 600 ] && { log "$2 did not open port 5222; see $3"; return 1; }
        sleep 0.1; i=$((i + 1))
    done
}

# ---------------------------------------------------------------- servers --
start_throng() {
    rel="${THRONG_REL:-$root/_build/default/rel/throng}"
    [ -x "$rel/bin/throng" ] || die "build the release first (make release)"
    export THRONG_NODE=throngsint@127.0.0.1 THRONG_RUN_DIR="$run" THRONG_CONFIG="$run/throng.yml"
    # Every extension module the release has, with its defaults; in-band
    # registration open (the suite may create accounts with it too).
    local mods m
    mods=$(ls "$rel"/lib/throng-*/ebin/ | sed -n 's/^throng_mod_\(.*\)\.beam$/\1/p' | sort -u)
    {
        echo "hosts: [$domain]"
        echo "data_dir: \"$run/data\""
        echo "loglevel: warning"
        echo "admins: [$admin_user@$domain]"
        echo "listen:"
        echo "  - port: 5222"
        echo "    ip: \"127.0.0.1\""
        echo "    starttls: optional"
        echo "stats:"
        echo "  port: 0"
        echo "modules:"
        for m in $mods; do
            case "$m" in
            register) echo "  register: {allow_create: true, ip_interval: 0}" ;;
            *) echo "  $m: {}" ;;
            esac
        done
    } > "$THRONG_CONFIG"
    stop_server() { "$rel/bin/throng" stop >&2 || true; }
    "$rel/bin/throng" start >&2
    wait_port "" throng "$run/console.log"
    "$rel/bin/throng" register "$admin_user" "$domain" "$admin_pass" >&2
    server_version="Throng $(cat "$rel/releases/start_erl.data" 2>/dev/null | cut -d' ' -f2) ($(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); modules: $(echo $mods | tr ' ' ','))"
}

start_prosody() {
    command -v prosody >/dev/null || die "prosody is not installed (apt-get install prosody)"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=$domain" \
        -keyout "$run/$domain.key" -out "$run/$domain.crt" >/dev/null 2>&1
    mkdir -p "$run/data/$domain/accounts"
    printf 'return {\n\t["password"] = "%s";\n};\n' "$admin_pass" > "$run/data/$domain/accounts/$admin_user.dat"
    cat > "$run/prosody.cfg.lua" <<EOF
-- private Prosody for the interop suite (generated by bench/interop.sh)
pidfile = "$run/prosody.pid"
data_path = "$run/data"
log = { warn = "$run/prosody.log" }
admins = { "$admin_user@$domain" }
modules_enabled = {
  "roster"; "saslauth"; "tls"; "disco"; "posix";
  "carbons"; "pep"; "private"; "blocklist"; "bookmarks";
  "vcard4"; "vcard_legacy"; "version"; "uptime"; "time"; "ping"; "lastactivity";
  "register"; "admin_adhoc"; "announce"; "mam"; "csi_simple"; "smacks"; "offline";
}
modules_disabled = { "s2s" }
c2s_ports = { 5222 }
c2s_interfaces = { "127.0.0.1" }
s2s_ports = { }
http_ports = { }
https_ports = { }
authentication = "internal_plain"
allow_registration = true
min_seconds_between_registrations = 0
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
default_archive_policy = true
limits = { c2s = { rate = "1000mb/s"; burst = "10s" } }
certificates = "$run"
ssl = { key = "$run/$domain.key"; certificate = "$run/$domain.crt" }
VirtualHost "$domain"
Component "conference.$domain" "muc"
  modules_enabled = { "muc_mam" }
  restrict_room_creation = false
EOF
    chown -R prosody:prosody "$run"
    setpriv --reuid=prosody --regid=prosody --init-groups \
        prosody --config "$run/prosody.cfg.lua" > "$run/stdout.log" 2>&1 &
    server_pid=$!
    stop_server() {
        kill "$server_pid" 2>/dev/null || true
        local i=0
        while kill -0 "$server_pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
        kill -9 "$server_pid" 2>/dev/null || true
    }
    wait_port "$server_pid" prosody "$run/prosody.log"
    server_version="Prosody $(dpkg-query -W -f '${Version}' prosody 2>/dev/null) (Debian)"
}

start_ejabberd() {
    local libs
    libs=$(ls -d /usr/lib/x86_64-linux-gnu/ejabberd-* /usr/lib/*/ejabberd-* 2>/dev/null | head -1 || true)
    [ -n "$libs" ] || die "ejabberd is not installed (apt-get install ejabberd)"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=$domain" \
        -keyout "$run/$domain.key" -out "$run/$domain.crt" >/dev/null 2>&1
    cat "$run/$domain.crt" "$run/$domain.key" > "$run/$domain.pem"
    mkdir -p "$run/db" "$run/logs"
    cat > "$run/ejabberd.yml" <<EOF
# private ejabberd for the interop suite (generated by bench/interop.sh)
hosts: [$domain]
loglevel: warning
log_rotate_count: 0
certfiles: ["$run/$domain.pem"]
listen:
  - port: 5222
    ip: "127.0.0.1"
    module: ejabberd_c2s
    max_stanza_size: 262144
    starttls: true
auth_method: internal
acl:
  admin:
    user: "$admin_user@$domain"
  local:
    user_regexp: ""
access_rules:
  local:
    allow: local
  c2s:
    allow: all
  announce:
    allow: admin
  configure:
    allow: admin
  muc_create:
    allow: local
  pubsub_createnode:
    allow: local
  register:
    allow: all
api_permissions:
  "admin access":
    who:
      access:
        allow:
          acl: admin
    what: "*"
shaper_rules:
  max_user_sessions: 10
  max_user_offline_messages: 5000
  c2s_shaper: none
modules:
  mod_adhoc: {}
  mod_admin_extra: {}
  mod_announce: {access: announce}
  mod_avatar: {}
  mod_blocking: {}
  mod_caps: {}
  mod_carboncopy: {}
  mod_client_state: {}
  mod_configure: {}
  mod_disco: {}
  mod_last: {}
  mod_mam: {assume_mam_usage: true, default: always}
  mod_muc:
    host: "conference.@HOST@"
    access: [allow]
    access_admin: [{allow: admin}]
    access_create: muc_create
    access_persistent: muc_create
    access_mam: [allow]
    default_room_options: {mam: true}
  mod_muc_admin: {}
  mod_offline: {access_max_user_messages: max_user_offline_messages}
  mod_ping: {}
  mod_privacy: {}
  mod_private: {}
  mod_pubsub:
    access_createnode: pubsub_createnode
    plugins: [flat, pep]
    force_node_config:
      "eu.siacs.conversations.axolotl.*": {access_model: open}
      "storage:bookmarks": {access_model: whitelist}
  mod_register: {ip_access: all, access: register}
  mod_roster: {versioning: true}
  mod_stream_mgmt: {resend_on_timeout: if_offline}
  mod_time: {}
  mod_vcard: {search: false}
  mod_vcard_xupdate: {}
  mod_version: {}
EOF
    local node=throng_interop_ejabberd@127.0.0.1 cookie=throng_interop_ejabberd
    (cd "$run" && ERL_LIBS="$libs" EJABBERD_CONFIG_PATH="$run/ejabberd.yml" exec erl -noinput \
        -name "$node" -setcookie "$cookie" \
        -mnesia dir "\"$run/db\"" -ejabberd log_path "\"$run/logs/ejabberd.log\"" \
        -s ejabberd > "$run/stdout.log" 2>&1) &
    server_pid=$!
    stop_server() {
        kill "$server_pid" 2>/dev/null || true
        local i=0
        while kill -0 "$server_pid" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
        kill -9 "$server_pid" 2>/dev/null || true
    }
    wait_port "$server_pid" ejabberd "$run/stdout.log and $run/logs"
    # The port opens before every table is ready: try for up to a minute.
    erl -noinput -name "interop_ctl_$$@127.0.0.1" -setcookie "$cookie" -eval "
        N = '$node', pong = net_adm:ping(N),
        Try = fun Try(K) ->
                  R = rpc:call(N, ejabberd_auth, try_register, [<<\"$admin_user\">>, <<\"$domain\">>, <<\"$admin_pass\">>]),
                  case R of
                      ok -> 0;
                      {error, exists} -> 0;
                      _ when K > 0 -> timer:sleep(1000), Try(K - 1);
                      _ -> io:format(standard_error, \"ejabberd: register $admin_user: ~p~n\", [R]), 1
                  end
              end,
        halt(Try(60))." >&2
    server_version="ejabberd $(dpkg-query -W -f '${Version}' ejabberd 2>/dev/null) (Debian)"
}

# One server: start it, run the suite against it, stop it. Runs in the
# private network namespace when there is one (see run_server).
run_one() {  # run_one SERVER OUTDIR
    local server=$1 out=$2
    local raw="$out/$server"
    [ "${INTEROP_IN_NETNS:-0}" = 1 ] && netns_up
    if ss -ltn "sport = :5222" | grep -q LISTEN; then
        die "127.0.0.1:5222 is in use (the suite always connects to port 5222); stop that server or run as root (INTEROP_NETNS=1)"
    fi
    run=$(mktemp -d "${TMPDIR:-/tmp}/throng-interop-$server.XXXXXX")
    chmod 755 "$run"
    rm -rf "$raw"; mkdir -p "$raw/logs"
    stop_server() { :; }
    suite_pid=
    trap '[ -z "$suite_pid" ] || kill "$suite_pid" 2>/dev/null || true; stop_server || true; if [ "${INTEROP_IN_NETNS:-0}" = 1 ]; then netns_kill_rest || true; fi; rm -rf "$run"' EXIT
    trap 'exit 130' INT TERM
    log "$server: starting (run dir $run)"
    "start_$server"
    echo "$server_version" > "$raw/server-version.txt"
    log "$server: $server_version; running the suite (reply timeout $SINT_TIMEOUT ms)"
    set -- java -Xmx1g \
        -Dsinttest.service="$domain" -Dsinttest.host=127.0.0.1 \
        -Dsinttest.securityMode=disabled \
        -Dsinttest.replyTimeout="$SINT_TIMEOUT" \
        -Dsinttest.adminAccountUsername="$admin_user" \
        -Dsinttest.adminAccountPassword="$admin_pass" \
        -Dsinttest.enabledConnections=tcp -Dsinttest.dnsResolver=javax \
        -Dsinttest.testRunResultProcessors=org.igniterealtime.smack.inttest.util.StdOutTestRunResultProcessor,org.igniterealtime.smack.inttest.util.JUnitXmlTestRunResultProcessor,throng.interop.InteropJsonResultProcessor \
        -Dsinttest.debugger=org.igniterealtime.smack.inttest.util.FileLoggerFactory \
        -DlogDir="$raw/logs" -Dinterop.results="$raw/results.jsonl"
    [ -n "${SINT_ENABLED_SPECS:-}" ] && set -- "$@" -Dsinttest.enabledSpecifications="$SINT_ENABLED_SPECS"
    [ -n "${SINT_DISABLED_SPECS:-}" ] && set -- "$@" -Dsinttest.disabledSpecifications="$SINT_DISABLED_SPECS"
    [ -n "${SINT_ENABLED_TESTS:-}" ] && set -- "$@" -Dsinttest.enabledTests="$SINT_ENABLED_TESTS"
    set -- "$@" -Dsinttest.disabledTests="$aborting${SINT_DISABLED_TESTS:+,$SINT_DISABLED_TESTS}"
    set -- "$@" -cp "$jar:$classes" org.igniterealtime.smack.inttest.SmackIntegrationTestFramework
    echo "$*" | sed "s/$admin_pass/***/" > "$raw/command.txt"
    local rc=0
    # in the background, so that a signal to this script ends the run at once
    timeout "$INTEROP_RUN_TIMEOUT" "$@" > "$raw/sint.log" 2>&1 &
    suite_pid=$!
    wait "$suite_pid" || rc=$?
    suite_pid=
    echo "$rc" > "$raw/exit-code.txt"
    # the suite exits non-zero when a test failed: that is a result, not an error
    [ -f "$raw/results.jsonl" ] || { log "$server: the suite wrote no results (exit $rc); see $raw/sint.log"; tail -20 "$raw/sint.log" >&2; return 1; }
    log "$server: $(grep -c '"result":"passed"' "$raw/results.jsonl" || true) passed, $(grep -c '"result":"failed"' "$raw/results.jsonl" || true) failed, $(grep -c '"result":"impossible"' "$raw/results.jsonl" || true) could not run"
    # keep the server's own log next to the suite's; compress the suite's
    # per-test XMPP traces
    for f in "$run/console.log" "$run/prosody.log" "$run/stdout.log" "$run"/log/*.log "$run"/logs/*.log; do
        if [ -f "$f" ]; then cp "$f" "$raw/server-$(basename "$f")"; fi
    done
    [ -f "$raw/logs/test-results.xml" ] && mv "$raw/logs/test-results.xml" "$raw/"
    tar -C "$raw" -cJf "$raw/traces.tar.xz" logs && rm -rf "$raw/logs"
    xz -f "$raw/results.jsonl" "$raw/sint.log"
    if [ -f "$raw/test-results.xml" ]; then xz -f "$raw/test-results.xml"; fi
    return 0
}

run_server() {  # run_server SERVER OUTDIR
    if [ "${INTEROP_NETNS:-$([ "$(id -u)" = 0 ] && echo 1 || echo 0)}" = 1 ]; then
        command -v unshare >/dev/null || die "unshare is missing (util-linux); or INTEROP_NETNS=0"
        INTEROP_IN_NETNS=1 unshare --net "$self" __run_one "$1" "$2"
    else
        INTEROP_IN_NETNS=0 "$self" __run_one "$1" "$2"
    fi
}

# ------------------------------------------------------------------- main --
if [ "${1:-}" = __run_one ]; then
    find_jar; compile_processor
    run_one "$2" "$3"
    exit $?
fi

case "${1:-}" in -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

command -v java >/dev/null || die "java is not installed (apt-get install openjdk-17-jre-headless)"
command -v python3 >/dev/null || die "python3 is not installed"
command -v openssl >/dev/null || die "openssl is not installed"
command -v xz >/dev/null || die "xz is not installed (apt-get install xz-utils)"
servers="$*"
if [ -z "$servers" ]; then
    servers=throng
    dpkg-query -W -f '${Status}' prosody 2>/dev/null | grep -q 'ok installed' && servers="$servers prosody"
    dpkg-query -W -f '${Status}' ejabberd 2>/dev/null | grep -q 'ok installed' && servers="$servers ejabberd"
fi
for s in $servers; do
    case "$s" in throng|prosody|ejabberd) ;; *) die "unknown server '$s' (throng, prosody, ejabberd)" ;; esac
done
find_jar; compile_processor
out=${INTEROP_OUT:-$root/bench/results/interop/$(date +%Y-%m-%d)}
mkdir -p "$out"
log "suite: $(basename "$jar") (Smack $(unzip -p "$jar" org.jivesoftware.smack/version 2>/dev/null | cut -d' ' -f1)); servers: $servers; results: $out"
ran=
for s in $servers; do
    if run_server "$s" "$out"; then ran="$ran $s"; else log "$s: no results"; fi
done
[ -n "$ran" ] || die "no server produced results"
python3 "$root/bench/interop/report.py" --jar "$jar" --suite-version "$SINT_VERSION (source: $SINT_REF)" \
    --timeout "$SINT_TIMEOUT" --out "$out" $ran
