# Reads a throng-bench timeseries.csv and prints the server's CPU time per
# unit of work over the rows where that work happened:
#   awk -v col=logins_s -f bench/per_unit.awk timeseries.csv
# col: the per-second rate column (logins_s, msgs_received_s, ...).
BEGIN { FS = "," }
NR == 1 { for (i = 1; i <= NF; i++) idx[$i] = i; next }
{
    t = $idx["t"]; dt = t - last; last = t
    rate = $idx[col]; cpu = $idx["server_cpu_pct"]
    if (rate > 0 && cpu != "") { work += rate * dt; cpus += cpu / 100 * dt; secs += dt }
}
END {
    if (work == 0) { print "no rows with " col " > 0"; exit 1 }
    printf "%s: %.0f in %.1f s (%.0f/s); server CPU %.2f s = %.1f us per unit (%.1f%% of one core on average)\n",
        col, work, secs, work / secs, cpus, cpus * 1e6 / work, cpus / secs * 100
}
