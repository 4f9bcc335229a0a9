# Reads a throng-bench timeseries.csv and prints the server's CPU time per
# unit of work:
#   awk -v col=logins_s [-v from=connects_s] -f bench/per_unit.awk timeseries.csv
# col:  the per-second rate column of the work (logins_s, msgs_received_s, ...);
# from: the column whose first non-zero row starts the window (default col:
#       for logins, connects_s, so that the server's work on logins still in
#       progress when the first one completes is counted too).
# The window runs from there to the last row where col > 0, idle seconds
# inside it included: the server's CPU over the whole span of the work.
BEGIN { FS = ","; if (from == "") from = col }
NR == 1 { for (i = 1; i <= NF; i++) idx[$i] = i; next }
{
    n++; t[n] = $idx["t"]; rate[n] = $idx[col]; cpu[n] = $idx["server_cpu_pct"]
    if (first == 0 && $idx[from] > 0) first = n
    if (rate[n] > 0) last = n
}
END {
    if (first == 0 || last == 0) { print "no rows with " col " > 0"; exit 1 }
    for (i = first; i <= last; i++) {
        dt = t[i] - (i > 1 ? t[i - 1] : 0)
        work += rate[i] * dt; secs += dt
        if (cpu[i] != "") cpus += cpu[i] / 100 * dt
    }
    printf "%s: %.0f in %.1f s (%.0f/s); server CPU %.2f s = %.1f us per unit (%.1f%% of one core on average)\n",
        col, work, secs, work / secs, cpus, cpus * 1e6 / work, cpus / secs * 100
}
