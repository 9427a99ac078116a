# SPDX-License-Identifier: BSD-3-Clause
# Charts of dlock-bench's TSV files; run by bench/dlock-bench.sh as
#   gnuplot -e "outdir='DIR'; chart='hist|redlock|watchdog'; term='pngcairo|png'" dlock-bench.gp
# Each TSV has a header row; columns are read by name.
if (!exists("term")) term = 'pngcairo'
if (term eq 'pngcairo') {
    set terminal pngcairo size 900,520 font ",10"
} else {
    set terminal png size 900,520
}
set datafile separator "\t"
set datafile columnheaders
set grid ytics
set key top right

if (chart eq 'hist') {
    # Acquire latency: log2 buckets (count on a log axis) and the
    # cumulative share on the right-hand axis.
    set output outdir.'/hist.png'
    set title 'dlock acquire latency, 1 node, uncontended'
    set xlabel 'latency bucket (us, upper bound)'
    set ylabel 'acquires'
    set logscale y
    set yrange [0.8:*]
    set y2label 'cumulative %'
    set y2range [0:100]
    set y2tics 10
    set ytics nomirror
    set style fill solid 0.6 border -1
    set boxwidth 0.8
    set xtics rotate by -45
    plot outdir.'/hist.tsv' using 0:'count':xtic(stringcolumn('hi_us') eq '-1' ? \
             '>'.stringcolumn('lo_us') : stringcolumn('hi_us')) with boxes title 'acquires', \
         '' using 0:'cum_pct' axes x1y2 with linespoints lw 2 pt 7 title 'cumulative %'
}

if (chart eq 'redlock') {
    # The cost of a quorum: cycle rate and acquire latency per node count.
    set output outdir.'/redlock.png'
    set multiplot layout 1,2 title 'dlock Redlock: acquire+release on 1, 3, 5 nodes (one thread)'
    set style data histograms
    set style histogram clustered gap 1
    set style fill solid 0.6 border -1
    set xlabel 'nodes'
    set ylabel 'cycles/s'
    set yrange [0:*]
    set title 'throughput'
    plot outdir.'/redlock.tsv' using 'cycles_per_s':xtic(1) title 'cycles/s'
    set ylabel 'acquire latency (us)'
    set title 'acquire latency'
    set key top left
    plot outdir.'/redlock.tsv' using 'acq_p50_us':xtic(1) title 'p50', \
         '' using 'acq_p99_us' title 'p99'
    unset multiplot
}

if (chart eq 'watchdog') {
    # Watchdog at scale: CPU of the client and of redis-server per wall
    # second while N auto-renewed locks are held.
    set output outdir.'/watchdog.png'
    set title 'dlock watchdog: CPU while holding N auto-renewed locks (TTL 3 s, renew 1 s)'
    set xlabel 'locks held'
    set ylabel 'CPU seconds per wall second'
    set logscale x
    set format x '%.0s%c'
    set yrange [0:*]
    set key top left
    plot outdir.'/watchdog.tsv' using 'held':'client_cpu_per_s' with linespoints lw 2 pt 7 \
             title 'client (dlock-bench process)', \
         '' using 'held':'server_cpu_per_s' with linespoints lw 2 pt 5 title 'redis-server'
}
